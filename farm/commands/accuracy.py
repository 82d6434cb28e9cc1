"""farm accuracy: ULP tables of the floating elementwise primitives against a correctly
rounded reference, per jax version and platform; stored, compared across versions, bisected."""
from __future__ import annotations

import argparse
import json
import sys

from farm.commands import add_db, number


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("accuracy", help="ULP tables of the elementwise primitives against a correctly rounded "
                                        "reference (exhaustive for 16-bit types), per jax version and platform")
    p.add_argument("--primitive", help="comma list (default: all of them; see docs/accuracy.md)")
    p.add_argument("--dtype", default="bfloat16,float16,float32,float64", help="comma list of floating dtypes")
    p.add_argument("--platforms", default="cpu,cuda,rocm,tpu",
                   help="cpu runs natively; cuda, rocm and tpu modules are compiled and run here (crossexec)")
    p.add_argument("--samples", type=number("--samples", minimum=1), default=None,
                   help="float32/float64 inputs per function, and pairs per binary function (default 2^20)")
    p.add_argument("--jax", help="comma list of jax versions (each in its own venv); default: this one")
    p.add_argument("--compare", metavar="OLD,NEW", help="print what moved between two stored versions and exit")
    p.add_argument("--bisect", metavar="OLD,NEW", help="with --primitive/--dtype/--platforms: measure the released "
                                                       "versions between OLD and NEW (or the versions listed, in "
                                                       "order, when more than two) and find where the max ULP moved")
    p.add_argument("--show", metavar="VERSION", help="print a stored table and exit")
    p.add_argument("--bounds", metavar="PATH", help="derive the tolerance bounds from every stored table, write "
                                                     "them to PATH (TOML) and exit")
    p.add_argument("--no-store", action="store_true", help="measure and print, store nothing")
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm.analysis import accuracy as A  # deferred: not needed by farm --help

    if args.compare or args.show or args.bounds:
        return _stored(args, A)
    if args.bisect:
        return _bisect(args, A)
    from farm.accuracy import functions, table  # deferred: gmpy2, mpmath

    fns = functions.select(_list(args.primitive))
    dtypes, platforms = _list(args.dtype), _list(args.platforms)
    samples = args.samples or table.SAMPLES
    store = None
    if not args.no_store:  # a bad --db is one line now, not after minutes of measuring
        from farm.commands import store_from  # noqa: PLC0415

        store = store_from(args, create=True)
    out = []
    for version, python in _pythons(args.jax):
        t = table.measure(fns, dtypes, platforms, samples=samples, python=python, log=_err)
        rows = [{"jax": t.jax, "jaxlib": t.jaxlib, "reference_key": table.reference_key(samples), **r.to_dict()}
                for r in t.rows]
        _err(f"jax {t.jax} (jaxlib {t.jaxlib}): {len(rows)} rows in {t.seconds:.1f} s")
        if store is not None:
            from farm.store import accuracy as S  # noqa: PLC0415

            with store.session() as s:
                S.put(s, t.jax, t.jaxlib, table.reference_key(samples), rows)
        out.append((t, rows))
    if args.format == "json":
        print(json.dumps([r for _, rows in out for r in rows], indent=1, default=str))
    else:
        for t, rows in out:
            print(f"jax {t.jax} / jaxlib {t.jaxlib} ({t.seconds:.0f} s)")
            print(A.render_text(rows))
        for (a, ra), (b, rb) in zip(out, out[1:]):
            print(A.render_moved(a.jax, b.jax, A.moved(ra, rb)))
    return 0


def _stored(args: argparse.Namespace, A) -> int:  # noqa: ANN001
    from farm.commands import store_from  # noqa: PLC0415
    from farm.errors import FarmError  # noqa: PLC0415
    from farm.store import accuracy as S  # noqa: PLC0415

    with store_from(args).session() as s:
        if args.bounds:
            from farm.catalog.ulps import write  # noqa: PLC0415

            rows = S.rows(s)
            if not rows:
                raise FarmError("no stored accuracy table: run farm accuracy first")
            b = A.bounds(rows)
            write(args.bounds, b, sorted({f"{r['jax']}" for r in rows}))
            print(f"wrote {sum(len(v) for v in b.values())} bounds to {args.bounds}")
            return 0
        if args.show:
            rows = _select(S.rows(s, args.show), args)
            print(json.dumps(rows, indent=1, default=str) if args.format == "json" else A.render_text(rows))
            return 0
        old, new = _list(args.compare)
        moved = A.moved(_select(S.rows(s, old), args), _select(S.rows(s, new), args))
    print(json.dumps(moved, indent=1, default=str) if args.format == "json" else A.render_moved(old, new, moved))
    return 0


def _bisect(args: argparse.Namespace, A) -> int:  # noqa: ANN001
    """Binary search over the released versions between OLD and NEW for the first whose table
    (of the selected primitives, dtypes, platforms) differs from OLD's."""
    from farm.accuracy import functions, table  # noqa: PLC0415
    from farm.errors import FarmError  # noqa: PLC0415
    from farm.run.versions.venvs import key  # noqa: PLC0415

    listed = _list(args.bisect)
    old, new = listed[0], listed[-1]
    fns = functions.select(_list(args.primitive))
    dtypes, platforms = _list(args.dtype), _list(args.platforms)
    samples = args.samples or table.SAMPLES
    between = listed if len(listed) > 2 else [v for v in _released() if key(old) <= key(v) <= key(new)]
    if len(between) < 2:
        raise FarmError(f"no released versions between {old} and {new}")
    rk = table.reference_key(samples)
    cache: dict[str, list[dict]] = {}

    def rows(v: str) -> list[dict]:
        if v not in cache:
            (_, python), = _pythons(v)
            t = table.measure(fns, dtypes, platforms, samples=samples, python=python, log=_err)
            cache[v] = [{"reference_key": rk, **r.to_dict()} for r in t.rows]
            _err(f"  jax {v}: max ULP {max((r['max_ulp'] for r in cache[v] if r['max_ulp'] == r['max_ulp']), default=0):.3g}")
        return cache[v]

    lo, hi = 0, len(between) - 1
    if not A.moved(rows(between[lo]), rows(between[hi])):
        print(f"nothing moved between jax {old} and {new}")
        return 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if A.moved(rows(between[lo]), rows(between[mid])):
            hi = mid
        else:
            lo = mid
    print(f"first moved in jax {between[hi]} (after {between[lo]}):")
    print(A.render_moved(between[lo], between[hi], A.moved(rows(between[lo]), rows(between[hi]))))
    return 0


def _released() -> list[str]:
    """jax versions the package index has (pip's view), oldest first."""
    import re  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    from farm.run.versions.venvs import key  # noqa: PLC0415

    p = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "jax"], capture_output=True, text=True)
    m = re.search(r"Available versions:(.*)", p.stdout)
    return sorted({v.strip() for v in m.group(1).split(",")} if m else set(), key=key)


def _pythons(versions: str | None) -> list[tuple[str, str | None]]:
    if not versions:
        return [("", None)]
    from farm.run.versions.venvs import provision  # noqa: PLC0415

    return [(v, provision(v).python) for v in _list(versions)]


def _select(rows: list[dict], args: argparse.Namespace) -> list[dict]:
    prims, dts, plats = set(_list(args.primitive)), set(_list(args.dtype)), set(_list(args.platforms))
    return [r for r in rows if (not prims or r["primitive"] in prims) and r["dtype"] in dts and r["platform"] in plats]


def _list(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
