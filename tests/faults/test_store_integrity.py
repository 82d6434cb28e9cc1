"""The store checks what it is given and checks itself: an address is verified when it is
written, a directory blob appears only when its row commits and is replaced when it does
not hash to its name, and ``farm db check`` finds (and ``--repair`` fixes) what is wrong.
Bundles are untrusted: a bomb, a malformed body or a poisoned artifact is one line, exit
2, and nothing is stored."""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from sqlalchemy import func, select

from farm.errors import ArtifactCorrupt, ArtifactMismatch
from farm.store import artifacts, open_store, writes
from farm.store.check import check
from farm.store.models import ArtifactRow, ResultRow, Run
from tests.helpers.rows import ENV, harness_desc, outcome

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOB = b"serialized export bytes" * 10
SHA = hashlib.sha256(BLOB).hexdigest()


def farm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})


def farm_here(capsys: pytest.CaptureFixture, *args: str) -> subprocess.CompletedProcess:
    """``farm`` in this process (the checks before a database is opened are what is tested)."""
    from farm.cli import main

    rc = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, out.out, out.err)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("farm: error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.fixture
def blobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "blobs"
    monkeypatch.setenv("FARM_ARTIFACT_DIR", str(d))
    return d


def blob_files(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file()) if d.exists() else []


# --------------------------------------------------------------------------- verified on write
@pytest.mark.parametrize("where", ["db", "dir"])
def test_put_refuses_bytes_that_do_not_hash_to_their_address(where: str, sqlite_url: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if where == "dir":
        monkeypatch.setenv("FARM_ARTIFACT_DIR", str(tmp_path / "blobs"))
    store = open_store(sqlite_url)
    with pytest.raises(ArtifactMismatch, match="hash to"), store.session() as s:
        artifacts.put(s, SHA, "export", b"poison", jax_version="x")
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(ArtifactRow)) == 0
        artifacts.put(s, SHA, "export", BLOB, jax_version="x")  # the genuine bytes are not blocked
    with store.session() as s:
        assert artifacts.get(s, SHA)[1] == BLOB
    assert blob_files(tmp_path / "blobs") == ([] if where == "db" else [tmp_path / "blobs" / SHA[:2] / SHA])


def test_a_rolled_back_write_leaves_no_blob_file(sqlite_url: str, blobs: Path) -> None:
    store = open_store(sqlite_url)
    with pytest.raises(RuntimeError), store.session() as s:
        artifacts.put(s, SHA, "export", BLOB, jax_version="x")
        s.flush()
        raise RuntimeError("the import fails after its blobs were put")
    assert blob_files(blobs) == []
    s = store.sessions()  # a session closed without commit: the same
    artifacts.put(s, SHA, "export", BLOB, jax_version="x")
    s.close()
    assert blob_files(blobs) == []
    with store.session() as s:
        artifacts.put(s, SHA, "export", BLOB, jax_version="x")
    assert blob_files(blobs) == [blobs / SHA[:2] / SHA]


def test_a_blob_file_that_does_not_hash_to_its_name_is_replaced(sqlite_url: str, blobs: Path) -> None:
    store = open_store(sqlite_url)
    with store.session() as s:
        artifacts.put(s, SHA, "export", BLOB, jax_version="x")
    (blobs / SHA[:2] / SHA).write_bytes(zlib.compress(b"tampered on disk"))
    with store.session() as s, pytest.raises(ArtifactCorrupt):
        artifacts.get(s, SHA)
    with store.session() as s:
        artifacts.put(s, SHA, "export", BLOB, jax_version="x")  # the row exists: the file is checked, not trusted
    with store.session() as s:
        assert artifacts.get(s, SHA)[1] == BLOB


# --------------------------------------------------------------------------- farm db check
def stored_run(url: str) -> None:
    store = open_store(url)
    with store.session() as s:
        run = writes.create_run(s, env=ENV, name="r", platforms=["cpu"], run_on=["cpu"], total=2)
        hids = writes.harness_ids(s, [harness_desc(i) for i in range(2)])
        writes.Writer(s, run, hids).write([outcome(0), outcome(1, blob=b"another module")])
    store.dispose()


def test_db_check_finds_and_repairs_without_deleting_good_blobs(sqlite_url: str, blobs: Path) -> None:
    stored_run(sqlite_url)
    r = farm("db", "check", "--db", sqlite_url, env={"FARM_ARTIFACT_DIR": str(blobs)})
    assert r.returncode == 0 and "clean" in r.stdout and "2 rows, 0 whose bytes" in r.stdout, r.stdout + r.stderr
    good, bad = sorted(blob_files(blobs))
    bad.write_bytes(zlib.compress(b"bit rot"))
    orphan = blobs / "ab" / ("ab" + "0" * 62)
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_bytes(b"left by an old rolled-back import")
    staging = blobs / "ab" / f"{'ab' + '1' * 62}.999999999.deadbeef.tmp"  # its writer (pid) is gone
    staging.write_bytes(b"x")
    good_bytes = good.read_bytes()
    r = farm("db", "check", "--db", sqlite_url, env={"FARM_ARTIFACT_DIR": str(blobs)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 whose bytes are missing or do not hash" in r.stdout and "2 orphans" in r.stdout
    assert "1 of them broken" in r.stdout
    r = farm("db", "check", "--repair", "--db", sqlite_url, env={"FARM_ARTIFACT_DIR": str(blobs)})
    assert r.returncode == 0 and "after repair: clean" in r.stdout, r.stdout + r.stderr
    assert not orphan.exists() and not staging.exists()
    assert good.read_bytes() == good_bytes and bad.exists()  # a blob a row names is never deleted
    store = open_store(sqlite_url)
    with store.session() as s:
        damaged = s.scalars(select(ArtifactRow.sha256).where(ArtifactRow.damaged.is_not(None))).all()
        assert damaged == [bad.name]
        with pytest.raises(ArtifactCorrupt, match="damaged"):
            artifacts.get(s, bad.name)
        assert s.scalar(select(func.count()).select_from(ResultRow)) == 6  # no result was touched
    # the next genuine write of the damaged address replaces it (the writer's cache skips only intact rows)
    blob = b"another module"
    assert hashlib.sha256(blob).hexdigest() == bad.name
    with store.session() as s:
        run = writes.create_run(s, env=ENV, name="again", platforms=["cpu"], run_on=["cpu"], total=1)
        writes.Writer(s, run, writes.harness_ids(s, [harness_desc(1)])).write([outcome(1, blob=blob)])
    with store.session() as s:
        assert artifacts.get(s, bad.name)[1] == blob
        assert check(s).ok and check(s).damaged == 0


def test_db_check_on_postgresql_finds_corrupt_rows(pg_url: str) -> None:
    stored_run(pg_url)
    store = open_store(pg_url)
    with store.session() as s:
        assert check(s).ok
        s.get(ArtifactRow, hashlib.sha256(b"module text").hexdigest()).data = zlib.compress(b"tampered")
    with store.session() as s:
        rep = check(s)
        assert not rep.ok and len(rep.bad) == 1 and rep.broken_references == 1
    with store.session() as s:
        check(s, repair=True)
    with store.session() as s:
        assert check(s).ok


# --------------------------------------------------------------------------- untrusted bundles
def genuine_doc() -> dict:
    blob = b"module text"
    sha = hashlib.sha256(blob).hexdigest()
    o = outcome(0, blob=blob).to_dict()
    for a in o["artifacts"]:
        a["data"] = base64.b64encode(a["data"]).decode()
    return {"format": "lowering-farm-bundle", "version": 1, "environment": ENV, "run": {"name": "b"},
            "harnesses": [harness_desc(0)], "outcomes": [o], "_sha": sha}


def save(path: Path, doc: dict) -> str:
    doc = {k: v for k, v in doc.items() if k != "_sha"}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return str(path)


def test_a_genuine_bundle_imports(tmp_path: Path, blobs: Path) -> None:
    db = f"sqlite:///{tmp_path / 'ok.db'}"
    r = farm("import", save(tmp_path / "b.json.gz", genuine_doc()), "--db", db, env={"FARM_ARTIFACT_DIR": str(blobs)})
    assert r.returncode == 0 and "imported 1 harness outcomes" in r.stdout, r.stderr
    assert len(blob_files(blobs)) == 1


def mutations() -> dict[str, object]:
    def poison(d: dict) -> None:
        d["outcomes"][0]["artifacts"][0]["data"] = base64.b64encode(b"poison").decode()

    return {
        "poisoned artifact": (poison, "hash to"),
        "not base64": (lambda d: d["outcomes"][0]["artifacts"][0].__setitem__("data", "@@@"), "not base64"),
        "artifacts a number": (lambda d: d["outcomes"][0].__setitem__("artifacts", 5), "is not of type 'array'"),
        "record without a stage": (lambda d: d["outcomes"][0]["records"][0].pop("stage"), "'stage' is a required"),
        "unknown status": (lambda d: d["outcomes"][0]["records"][0].__setitem__("status", "great"), "is not one of"),
        "unlisted harness": (lambda d: d.__setitem__("harnesses", []), "not among the bundle's harnesses"),
        "dangling artifact": (lambda d: d["outcomes"][0].__setitem__("artifacts", []), "is not in the bundle"),
        "environment missing": (lambda d: d.pop("environment"), "'environment' is a required"),
        "platform too long": (lambda d: d["outcomes"][0]["records"][0].__setitem__("platform", "p" * 65), "too long"),
        "metric not a number": (lambda d: d["outcomes"][0]["records"][1]["metrics"].__setitem__("x", "y"),
                                "is not of type 'number'"),
        "document a list": (lambda d: d.clear(), "not a Lowering Farm results bundle"),
        "jax code a string": (lambda d: d["outcomes"][0].__setitem__("deps", "everything"), "is not of type"),
        "jax code row not an address": (lambda d: d["outcomes"][0].__setitem__(
            "deps", {"set": "a" * 64, "rows": {"../etc": {"parts": []}}}), "does not match"),
        "jax code oversized": (lambda d: d["outcomes"][0].__setitem__(
            "deps", {"set": "a" * 64, "rows": {"a" * 64: {"units": {"lax.py": ["u"] * 20001}}}}), "is malformed at outcomes/0/deps/rows/"),
        "jax code key too long": (lambda d: d["outcomes"][0].__setitem__("deps_key", "k" * 65), "too long"),
    }


@pytest.mark.parametrize("what", list(mutations()))
def test_a_bad_bundle_is_one_line_and_stores_nothing(what: str, tmp_path: Path, blobs: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    mutate, needle = mutations()[what]
    doc = genuine_doc()
    mutate(doc)
    db = tmp_path / "bad.db"
    r = farm_here(capsys, "import", save(tmp_path / "bad.json.gz", doc), "--db", f"sqlite:///{db}")
    assert needle in one_error_line(r)
    assert not db.exists() and blob_files(blobs) == []  # no database, no run, no blob


def test_a_bundle_bomb_stops_at_the_limit(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb") as f:
        f.write(b'{"format": "lowering-farm-bundle", "version": 1, "outcomes": [{"artifacts": [{"data": "')
        for _ in range(24):
            f.write(b"A" * 2**20)
        f.write(b'"}]}]}')
    db = tmp_path / "bomb.db"
    line = one_error_line(farm("import", str(bomb), "--db", f"sqlite:///{db}", env={"FARM_BUNDLE_MAX_MB": "16"}))
    assert "decompresses to more than 16 MiB" in line and not db.exists()


@pytest.mark.parametrize("body", [b"", b"\x1f\x8b\x08\x00garbage", b"not gzip at all"])
def test_a_truncated_or_foreign_file_is_one_line(body: bytes, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "x.json.gz"
    p.write_bytes(body if body else gzip.compress(b'{"format": "lowering-farm-bundle"')[:-8])
    assert "cannot read" in one_error_line(farm_here(capsys, "import", str(p), "--db", f"sqlite:///{tmp_path / 'x.db'}"))


def test_a_garbage_journal_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "out.json.gz.journal.jsonl"
    p.write_text('{"format": "lowering-farm-journal", "version": 1, "run": [], "environment": 3}\n'
                 '{"outcome": {"fingerprint": "x"}}\n[[[[\n')
    line = one_error_line(farm_here(capsys, "import", str(p), "--db", f"sqlite:///{tmp_path / 'j.db'}"))
    assert "is malformed" in line


def test_a_run_refused_by_the_database_stores_nothing(sqlite_url: str, blobs: Path) -> None:
    """Past the schema, a failure inside the import's transaction (here: a reserved run name
    given by the bundle) leaves no run and no blob file."""
    from farm.errors import FarmError
    from farm.run.bundles import import_docs, load

    doc = genuine_doc()
    doc["run"]["name"] = "latest"
    docs = load(save(blobs.parent / "b.json.gz", doc))
    store = open_store(sqlite_url)
    with pytest.raises(FarmError):
        import_docs(store, docs, "b.json.gz", None)
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 0
        assert s.scalar(select(func.count()).select_from(ArtifactRow)) == 0
    assert blob_files(blobs) == []


# --------------------------------------------------------------------------- code_deps
@pytest.mark.parametrize("db", ["sqlite_url", "pg_url"])
def test_db_check_finds_a_damaged_code_deps_row_and_repair_lets_the_next_sweep_restore_it(
        db: str, request: pytest.FixtureRequest) -> None:
    from farm.cache.units import address
    from farm.store import codedeps
    from farm.store.models import CodeDepsRow

    url = request.getfixturevalue(db)
    part = {"units": {"jax/_src/lax/lax.py": ["_sin_lowering"]}}
    other = {"units": {"jax/_src/interpreters/mlir.py": ["lower_fun"]}}
    code_set = {"parts": sorted([address(part), address(other)])}
    rows = {address(b): b for b in (part, other, code_set)}
    deps = {"set": address(code_set), "rows": rows}

    def write(name: str) -> None:
        with store.session() as s:
            run = writes.create_run(s, env=ENV, name=name, platforms=["cpu"], run_on=["cpu"], total=1)
            writes.Writer(s, run, writes.harness_ids(s, [harness_desc(0)])).write(
                [outcome(0).replace(result_key="r", deps_key="k", deps=deps)])

    store = open_store(url)
    write("first")
    with store.session() as s:
        rep = check(s)
        assert rep.ok and rep.code_rows == 3 and rep.unreadable_sets == 0, rep.lines()
        s.get(CodeDepsRow, address(other)).body = zlib.compress(b'{"units": {}}')  # a part, tampered
    with store.session() as s:
        rep = check(s)
        assert not rep.ok and rep.bad_code == (address(other),) and rep.unreadable_sets == 1, rep.lines()
        assert codedeps.sets(s, [address(code_set)]) == {}  # reads skip it already: a miss, never a wrong hit
    write("again")  # a write does not replace a row that is there, damaged or not
    with store.session() as s:
        assert check(s).bad_code == (address(other),)
        fixed = check(s, repair=True)
        assert fixed.repaired["damaged code_deps rows deleted"] == 1
    with store.session() as s:
        rep = check(s)
        assert rep.ok and rep.code_rows == 2 and rep.unreadable_sets == 2, rep.lines()  # both runs' outcomes
        assert s.get(CodeDepsRow, address(part)) is not None  # only the damaged row went
    write("third")  # the next sweep that ran that code writes it again
    with store.session() as s:
        rep = check(s)
        assert rep.ok and rep.code_rows == 3 and rep.unreadable_sets == 0, rep.lines()
        assert set(codedeps.sets(s, [address(code_set)])[address(code_set)]) == {address(part), address(other)}
    store.dispose()
