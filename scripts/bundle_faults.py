"""The bundle and store faults of docs/reliability.md, measured on whatever farm is on
PYTHONPATH: a poisoned bundle (bytes that do not hash to their address) followed by the
genuine one, a rolled-back import into a blob directory, a gzip bomb (peak RSS of
``farm import``) and a malformed bundle. Prints one line per case.

    PYTHONPATH=. python scripts/bundle_faults.py [--bomb-mib 1024]
"""
from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def farm(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, float, float]:
    """rc, last stderr line, wall seconds, peak RSS (MiB) of one ``farm`` process."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "farm", *args], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    out, err = p.communicate()
    _, status, ru = os.wait4(p.pid, 0) if p.returncode is None else (0, 0, None)
    rss = (ru.ru_maxrss / 1024) if ru else float("nan")
    lines = (err or out).decode(errors="replace").strip().splitlines()
    return p.returncode, (lines[-1] if lines else ""), time.monotonic() - t0, rss


def farm_rss(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, float, float]:
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "farm", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    lines = err.decode(errors="replace").strip().splitlines()
    tb = any(l.startswith("Traceback") for l in lines)
    return rc, ("TRACEBACK ... " if tb else "") + (lines[-1] if lines else ""), time.monotonic() - t0, ru.ru_maxrss / 1024


def genuine(path: str) -> dict:
    """A real bundle: sin float32 run on this host's CPU."""
    from farm import catalog
    from farm.pipeline import run_harness
    from farm.host import describe
    from farm.formats.bundles import write
    from farm.results import Options

    hs = catalog.select(catalog.Filters.parse(primitive="sin", dtype="float32"))[:1]
    opts = Options(platforms=("cpu",), run_on=("cpu",), crossexec=False, repeats=1)
    write(path, environment=describe(), run={"name": "genuine", "catalog": "farm", "platforms": ["cpu"],
                                             "run_on": ["cpu"]},
          harnesses=[h.describe() for h in hs], outcomes=[run_harness(h, opts) for h in hs])
    with gzip.open(path, "rt") as f:
        return json.load(f)


def save(path: str, doc: dict) -> None:
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)


def read_back(db: str, sha: str, env: dict[str, str]) -> str:
    code = ("import sys; from farm.store import open_store, artifacts\n"
            "s = open_store(sys.argv[1])\n"
            "with s.session() as x:\n"
            "    try:\n        artifacts.get(x, sys.argv[2]); print('reads back intact')\n"
            "    except Exception as e: print(type(e).__name__ + ': ' + str(e))\n")
    r = subprocess.run([sys.executable, "-c", code, db, sha], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, **env})
    return (r.stdout or r.stderr).strip().splitlines()[-1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="poison,rollback,bomb,malformed")
    ap.add_argument("--bomb-mib", type=int, default=1024, help="decompressed size of the gzip bomb")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bundle-faults-")
    good = genuine(os.path.join(d, "good.json.gz"))
    sha = next(a_["sha256"] for o in good["outcomes"] for a_ in o["artifacts"])

    cases = a.cases.split(",")
    # 1. poisoned: the same addresses with other bytes, imported first; then the genuine bundle
    for where in ("db", "dir") if "poison" in cases else ():
        env = {"FARM_ARTIFACT_DIR": os.path.join(d, f"blobs-{where}")} if where == "dir" else {}
        bad = json.loads(json.dumps(good))
        for o in bad["outcomes"]:
            for art in o["artifacts"]:
                art["data"] = base64.b64encode(b"not the bytes this address names").decode()
        save(os.path.join(d, "poison.json.gz"), bad)
        db = f"sqlite:///{d}/poison-{where}.db"
        rc, line, _, _ = farm_rss("import", os.path.join(d, "poison.json.gz"), "--db", db, "--name", "poison", env=env)
        print(f"poisoned bundle ({where} blobs): import exit {rc}: {line}")
        rc, line, _, _ = farm_rss("import", os.path.join(d, "good.json.gz"), "--db", db, "--name", "genuine", env=env)
        print(f"  then the genuine bundle: import exit {rc}: {line}")
        print(f"  then reading artifact {sha[:12]}: {read_back(db, sha, env)}")

    # 2. a rolled-back import into a blob directory (a status the database refuses, after the blobs)
    if "rollback" in cases:
        rollback(d, good, sha)
    if "bomb" in cases:
        bomb(d, good, a.bomb_mib)
    if "malformed" in cases:
        malformed(d, good)
    print(f"(files in {d})")


def rollback(d: str, good: dict, sha: str) -> None:
    env = {"FARM_ARTIFACT_DIR": os.path.join(d, "blobs-rb")}
    rb = json.loads(json.dumps(good))
    for o in rb["outcomes"]:
        for art in o["artifacts"]:
            art["data"] = base64.b64encode(b"bytes of a rolled-back import").decode()
    rb["outcomes"][0]["records"][-1]["stage"] = None  # the database refuses the row after the blobs are put
    save(os.path.join(d, "rollback.json.gz"), rb)
    db = f"sqlite:///{d}/rollback.db"
    rc, line, _, _ = farm_rss("import", os.path.join(d, "rollback.json.gz"), "--db", db, env=env)
    left = sum(len(fs) for _, _, fs in os.walk(env["FARM_ARTIFACT_DIR"])) if os.path.isdir(env["FARM_ARTIFACT_DIR"]) else 0
    print(f"rolled-back import: exit {rc}: {line}; blob files left behind: {left}")
    rc, line, _, _ = farm_rss("import", os.path.join(d, "good.json.gz"), "--db", db, "--name", "genuine", env=env)
    print(f"  then the genuine bundle: import exit {rc}; reading {sha[:12]}: {read_back(db, sha, env)}")



def bomb(d: str, good: dict, mib: int) -> None:
    # 3. a gzip bomb: the right header, then one artifact's base64 of --bomb-mib MiB
    bomb = os.path.join(d, "bomb.json.gz")
    head = json.dumps({"format": "lowering-farm-bundle", "version": 1, "environment": good["environment"],
                       "run": {"name": "bomb"}, "harnesses": good["harnesses"]})[:-1]
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(head.encode() + b', "outcomes": [{"fingerprint": "x", "name": "x", "records": [], "artifacts": '
                b'[{"sha256": "' + b"0" * 64 + b'", "kind": "io", "data": "')
        chunk = b"A" * (1 << 20)
        for _ in range(mib):
            f.write(chunk)
        f.write(b'"}]}]}')
    rc, line, wall, rss = farm_rss("import", bomb, "--db", f"sqlite:///{d}/bomb.db")
    print(f"gzip bomb ({os.path.getsize(bomb) / 2**20:.1f} MiB on disk, {mib} MiB inflated): exit {rc} in "
          f"{wall:.1f}s, peak RSS {rss:.0f} MiB: {line}")



def malformed(d: str, good: dict) -> None:
    # 4. malformed bodies behind a good header
    cases = {"artifacts is a number": lambda doc: doc["outcomes"][0].__setitem__("artifacts", 5),
             "a record without a stage": lambda doc: doc["outcomes"][0]["records"][0].pop("stage"),
             "outcomes is a string": lambda doc: doc.__setitem__("outcomes", "x"),
             "an outcome for an unlisted harness": lambda doc: doc.__setitem__("harnesses", []),
             "a record with an unknown status": lambda doc: doc["outcomes"][0]["records"][0].__setitem__("status", "great")}
    for what, mutate in cases.items():
        doc = json.loads(json.dumps(good))
        mutate(doc)
        p = os.path.join(d, "bad.json.gz")
        save(p, doc)
        db = f"sqlite:///{d}/bad-{abs(hash(what))}.db"
        rc, line, _, _ = farm_rss("import", p, "--db", db)
        print(f"malformed bundle ({what}): exit {rc}: {line[:160]}")


if __name__ == "__main__":
    main()
