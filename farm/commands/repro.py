"""farm repro: a standalone reproducer (and with --minimize the smallest one) for a failing harness."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from farm.commands import add_db, number, store_from
from farm.errors import ConfigError, FarmError, UnknownName
from farm.results import REPRODUCIBLE


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("repro", help="write a standalone repro.py (jax and numpy only) for a failing harness; "
                                     "--minimize shrinks it to the smallest program and input that still fail")
    p.add_argument("harness", help="the harness's full name (farm catalog lists them)")
    p.add_argument("--catalog", help="a catalog (farm, upstream, api, pallas, shape_poly, all), or planted (with "
                                     "--modules); default: the --run's catalog, else farm")
    p.add_argument("--modules", help="extra harness modules to import (e.g. harnesses.planted)")
    p.add_argument("--platform", help="the failure on this platform (cpu, cuda, rocm, tpu, export)")
    p.add_argument("--run", metavar="RUN", help="the failure a stored run recorded (id, name, latest): its stage, "
                                                "platform, configuration and environment")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="the configuration to fail in, e.g. x64=on (keys as farm sweep --config)")
    p.add_argument("--exported-by", metavar="RUN", help="with --run and an xhost failure: the stored run that made "
                                                        "the artifact (default: a version sweep's NAME@jax=V)")
    p.add_argument("-o", "--out", metavar="DIR", help="the directory to write (default: repro-HARNESS)")
    p.add_argument("--shapes", default="static", metavar="KINDS",
                   help="run the harness at static shapes, its symbolic variant's, or static,symbolic to find its "
                        "failure (as farm sweep --shapes; a --run's symbolic failure adds symbolic) (default: static)")
    p.add_argument("--vjp", type=int, choices=(1, 2), default=0, metavar="ORDER",
                   help="run the harness with its derivatives judged (as farm sweep --vjp 1|2) to find its failure "
                        "(a --run's vjp or vjp2 failure sets it)")
    p.add_argument("--stage", metavar="STAGE",
                   help="the failure of this stage (e.g. vjp2, symbolic_call), where the harness fails at several; "
                        "a symbolic or vjp stage runs the harness with what it needs (default: the first failure)")
    p.add_argument("--minimize", action="store_true", help="delta-debug to the smallest failing program and input")
    p.add_argument("--timeout", type=number("--timeout", float, above=0), default=60.0,
                   help="seconds one minimization candidate may run before it counts as a hang")
    add_db(p)
    p.set_defaults(func=repro_cmd)


def _configure(specs: list[str]) -> dict[str, str]:
    """The environment of one configuration (jax reads it at import, so before anything imports jax)."""
    if not specs:
        return {}
    from farm.run.configs import parse  # deferred: not needed by farm --help

    configs = parse(specs)
    if len(configs) != 1:
        raise ConfigError(f"--config: one configuration to reproduce in, not {len(configs)} ({configs[0].label}, ...)")
    return configs[0].env


def _stored(args: argparse.Namespace) -> dict[str, Any]:
    """The stored run's failing record of the harness, its configuration and environment."""
    from farm.store import queries  # deferred: farm.store; only with --run

    store = store_from(args)
    with store.session() as s:
        run = queries.resolve_run(s, args.run)
        info = queries.run_dict(s, run, with_counts=False)
        rows = [r for r in queries.results(s, run.id) if r["harness"] == args.harness]
    if not rows:
        raise FarmError(f"run {info['name']!r} has no results for {args.harness!r}")
    bad = [r for r in rows if r["status"] in REPRODUCIBLE
           and (not args.platform or r["platform"] == args.platform) and (not args.stage or r["stage"] == args.stage)]
    if not bad:
        raise FarmError(f"{args.harness} did not fail in run {info['name']!r}: nothing to reproduce")
    # as farm.repro.case.pick: undeclared before declared failures; structural checks (nothing to run) last
    order = {"crashed": 0, "timeout": 0, "error": 1, "fail": 1, "expected_fail": 2}
    r = min(bad, key=lambda x: (x["stage"] in ("census", "sharding"), order[x["status"]]))
    label = info["name"].partition("@")[2]
    if (info.get("dims") or {}).get("exported_on"):  # a version sweep's pair: not a configuration
        label = ""
    return {"run": info["name"], "catalog": info.get("catalog"), "stage": r["stage"], "platform": r["platform"], "status": r["status"],
            "error_type": r["error_type"], "error": r["error"], "config": label, "record": r,
            "dims": info.get("dims") or {},
            **{k: info["environment"].get(k) for k in ("jax_version", "jaxlib_version", "xla_flags")}}


def _foreign(args: argparse.Namespace, stored: dict[str, Any]):  # noqa: ANN202
    """The artifact of an xhost failure, read from the run that made it, and Pythons with the
    exporter's and the runner's jax (a version sweep's cached venvs)."""
    from farm.repro.foreign import Foreign  # deferred: jax; not needed by farm --help
    from farm.run.bundles import priors
    from farm.run.versions.venvs import provision
    from farm.stages.xhost import Prior

    rec, dims = stored["record"], stored["dims"]
    exported_on, run_on = dims.get("exported_on"), dims.get("jax_version") or stored.get("jax_version")
    exporter = args.exported_by or (f"{dims['series']}@jax={exported_on}" if exported_on and dims.get("series") else None)
    if exporter is None:
        raise FarmError(f"run {stored['run']!r} does not record which run exported {args.harness}'s artifact: "
                        "name it with --exported-by RUN")
    found = priors(store_from(args), exporter, ["wanted"], [args.harness])
    if "wanted" not in found:
        raise FarmError(f"run {exporter!r} has no serialized export and CPU outputs of {args.harness}")
    prior = Prior.from_json(found["wanted"])
    exported_on = exported_on or prior.meta.get("jax_version")
    pythons = {v: provision(v).python for v in {exported_on, run_on} if v}
    return Foreign(prior.export, prior.inputs, prior.outputs, rec, stored["run"], exporter, exported_on, run_on, pythons)


def _foreign_cmd(args: argparse.Namespace, stored: dict[str, Any], catalog: str, modules: tuple[str, ...],
                 out: Path) -> int:
    from farm.repro.foreign import reproduce_foreign

    rep = reproduce_foreign(catalog, modules, args.harness, out, _foreign(args, stored))
    r = rep.record
    print(f"{rep.harness}: xhost on {r['platform']} {r['status']}: {(r.get('error') or '')[:200]}")
    for version, w in rep.runs:
        last = w.output.strip().splitlines()[-1] if w.output.strip() else ""
        print(f"  {w.path} with jax {version}: exits {w.rc} ({last})")
    if rep.runs[0][1].rc != 1:
        print("farm: the script does not exit 1 with the failing version: it does not reproduce the failure (see above)")
        return 1
    return 0


def repro_cmd(args: argparse.Namespace) -> int:
    from farm.results import STAGES

    if args.stage and args.stage not in STAGES:
        raise UnknownName("stage", args.stage, STAGES)
    stored = _stored(args) if args.run else None
    specs = list(args.config) or ([s for s in stored["config"].split(",") if s] if stored and stored["config"] else [])
    os.environ.update(_configure(specs))
    from farm.repro import reproduce  # deferred: jax, the pipeline; not needed by farm --help

    out = Path(args.out or f"repro-{args.harness.replace('/', '_')}")
    modules = tuple(m.strip() for m in (args.modules or "").split(",") if m.strip())
    catalog = args.catalog or (stored or {}).get("catalog") or "farm"
    from farm.catalog.registry import CATALOGS

    if catalog not in (*CATALOGS, "planted") and stored and not args.catalog:
        catalog = "all"  # a run of a catalog this farm does not know (an older farm's name)
    if stored and stored["stage"] == "xhost":
        if args.minimize:
            raise ConfigError("--minimize: an xhost failure is another version's artifact, which is not minimized "
                              "(write it without --minimize)")
        return _foreign_cmd(args, stored, catalog, modules, out)
    from farm.platforms import parse_list
    from farm.results import SHAPE_KINDS

    shapes = parse_list(args.shapes, SHAPE_KINDS, "shape kind (--shapes)") or ("static",)
    rep = reproduce(catalog, modules, args.harness, out, platform=args.platform, stored=stored,
                    do_minimize=args.minimize, timeout_s=args.timeout, shapes=tuple(shapes),
                    vjp=args.vjp, stage=args.stage)
    f = rep.failure
    print(f"{rep.harness}: {f.stage} on {f.platform} {f.status}: {(f.error or '')[:200]}")
    ok = True
    for label, w in (("repro", rep.full), ("minimized", rep.minimized)):
        if w is None:
            continue
        last = w.output.strip().splitlines()[-1] if w.output.strip() else ""
        plain = (f"; run plainly, without its overlay: exits {w.plain_rc}" if w.plain_rc is not None else "")
        print(f"  {label}: {w.path} exits {w.rc} standalone (run.sh){plain} ({last})")
        ok = ok and w.rc == 1
    if rep.search is not None:
        d = rep.search.to_dict()
        print(f"  minimized in {d['seconds']} s: {d['candidates']} candidates ({d['kept']} kept, "
              f"{d['worker_restarts']} worker restarts); {d['start']['eqns']} -> {d['end']['eqns']} equations, "
              f"{d['start']['elements']} -> {d['end']['elements']} input elements ({out / 'steps.json'})")
    if not ok:
        print("farm: a written script does not exit 1 standalone: it does not reproduce the failure (see above)")
        return 1
    return 0
