"""farm sweep: run a selection of the catalog on Ray and store the results."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from farm.commands import add_db, add_filters, filters_from, number, store_from
from farm.commands.show import print_run
from farm.errors import ConfigError
from farm.platforms import DEVICE_KINDS, GPU_BACKEND_CHOICES, LOWERING_PLATFORMS, parse_list, parse_targets
from farm.results import SHAPE_KINDS, VJP_ORDERS, Options, RunDims, choices, owned_options
from farm.run.request import SweepRequest

DEFAULT_PRIMITIVES = "exp,sin,tanh,log1p,add,mul,div,max"
DEFAULT_DTYPES = "float32,float16,int32"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run harnesses through every stage on Ray and store the results",
                       description="Select harnesses, fan them out to Ray workers (a local cluster unless "
                                   "--address), store every stage's result, print the summary matrix.")
    add_filters(p, names_run=True)
    add_db(p)
    p.add_argument("--platforms", default="cpu,cuda,rocm,tpu", help="platforms to lower and export for")
    p.add_argument("--run-on", default="cpu", help="device kinds to compile and execute on natively, each on workers of "
                                                "its own kind (cpu,gpu,tpu, or a PJRT plugin platform)")
    p.add_argument("--address", help="join an existing Ray cluster (e.g. 127.0.0.1:6379) instead of starting one")
    p.add_argument("--workers", type=number("--workers", minimum=1), help="worker processes (default: one per core / cpu_slot)")
    p.add_argument("--gpu-fraction", type=number("--gpu-fraction", float, above=0, maximum=1), default=0.25,
                   help="share of one GPU (Ray num_gpus) each gpu worker holds; its memory cap matches")
    p.add_argument("--gpu-backend", choices=GPU_BACKEND_CHOICES, default="cuda",
                   help="the JAX backend gpu workers are pinned to (JAX_PLATFORMS); auto: no pin, the GPU "
                        "plugin jax loads decides (results are labelled cuda or rocm from it either way)")
    p.add_argument("--name", dest="run_name", help="name the run (the harness-name filter is --match)")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted run (id, name or latest)")
    p.add_argument("--force", action="store_true", help="recompute even if results are cached")
    p.add_argument("--timeout", type=number("--timeout", float, above=0), default=120.0, help="per-harness time limit in seconds")
    p.add_argument("--batch", type=number("--batch", minimum=1), default=None,
                   help="at most this many harnesses per worker call (default: about 1 s of work each)")
    p.add_argument("--repeats", type=number("--repeats", minimum=1), default=3, help="timed executions per harness")
    p.add_argument("--no-crossexec", action="store_true", help="skip running other platforms' modules on CPU")
    p.add_argument("--shapes", default="static", metavar="KINDS",
                   help="static (as declared), symbolic (each harness's symbolic variant: a symbolic leading dimension, "
                        "exported for every platform, called at several sizes), or static,symbolic")
    p.add_argument("--pallas-targets", metavar="TARGETS",
                   help="with --catalog pallas: the targets to export kernels for, each a TPU generation (tpu:v5e), "
                        "a GPU platform and backend (cuda:triton, cuda:mosaic_gpu, rocm:triton), a platform (tpu) "
                        "or a backend (triton); default: every target of --platforms")
    p.add_argument("--vjp", nargs="?", const="1", default="0", metavar="ORDER",
                   help="also differentiate each harness with floating inputs: its export serialized with ORDER (1, "
                        "the default, or 2) orders of vjp, read back, each platform's vjp run on the CPU and judged "
                        "against jax.vjp and finite differences of the float64 reference (docs/gradients.md)")
    for c in choices():  # each check's which-harnesses option, declared by its spec
        p.add_argument(c.flag, dest=c.field, nargs="?", const=c.const, default=None, metavar="WHICH", help=c.help)
    p.add_argument("--default", action="store_true",
                   help=f"the quick default selection ({DEFAULT_PRIMITIVES} in {DEFAULT_DTYPES})")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--config", action="append", metavar="KEY=V1,V2",
                   help="sweep once per configuration, one run each named NAME@KEY=V: x64=on,off; shardy=on,off; "
                        "matmul_precision=default,highest,...; xla_flags=NAME (farm.toml [xla_flags]) or none. "
                        "Repeat for a cartesian product")
    p.add_argument("--jax", metavar="V1,V2",
                   help="sweep once per jax version, each in its own cached venv from the package index and on that "
                        "version's own catalog (runs NAME@jax=V), then run every version's exports on every other "
                        "(runs NAME@xver=A>B); see farm versions NAME")
    p.add_argument("--no-cross", action="store_true", help="with --jax: skip the cross-version export matrix")
    g = p.add_argument_group("run dimensions (set by configuration sweeps and schedules; stored as columns)")
    g.add_argument("--series", help="the sweep of several runs this run is one of")
    g.add_argument("--schedule", help="the farm.toml sweep that scheduled this run")
    g.add_argument("--slot", help="its schedule slot, YYYYMMDDTHHMMZ")
    p.add_argument("--submit", action="store_true",
                   help="run this sweep as a Ray job on the cluster (the driver runs on the head; "
                        "needs --dashboard and a --db the head can open)")
    p.add_argument("--dashboard", default=os.environ.get("RAY_DASHBOARD_ADDRESS"),
                   help="Ray dashboard URL for --submit (default: $RAY_DASHBOARD_ADDRESS), e.g. http://HEAD:8265")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    vjp_order(args.vjp)  # a bad order is one line before anything is submitted, started or stored
    if args.submit:
        from farm.commands.schedule import submit_sweep  # noqa: PLC0415  (only with --submit)

        return submit_sweep(SweepRequest.from_namespace(args))
    if args.config and args.jax:
        raise ConfigError("--config and --jax: sweep one dimension at a time (a version sweep per configuration: "
                          "set the configuration's variables, e.g. JAX_ENABLE_X64=1, around farm sweep --jax)")
    if args.config:
        return _sweep_configs(args)
    if args.jax:
        return _sweep_versions(args)
    from farm import catalog  # deferred: farm.catalog; not needed by farm --help
    from farm.run.sweep import SweepConfig, sweep  # deferred: farm.run.sweep (ray+jax); not needed by farm --help

    if args.default:
        args.primitive = args.primitive or DEFAULT_PRIMITIVES
        args.dtype = args.dtype or DEFAULT_DTYPES
    platforms = parse_targets(args.platforms, LOWERING_PLATFORMS, "platform")
    run_on = parse_targets(args.run_on, DEVICE_KINDS, "device kind (--run-on)")
    # a PJRT plugin kind runs its own platform's module: lower for it too
    platforms += tuple(k for k in run_on if k not in DEVICE_KINDS and k not in platforms)
    filters = filters_from(args)  # checked before a database is created
    asked = checks(args)
    # the catalog (and any --modules) is loaded before a database exists: a harness module that
    # fails to load (a symbolic spec that does not parse, a bad --jax-repo) is one line, and nothing is stored
    hs = None if args.resume else catalog.select(filters)
    store = store_from(args, create=True)
    if args.resume:
        from farm.store import queries  # deferred: farm.store.queries (sqlalchemy); not needed by farm --help

        with store.session() as s:
            r = queries.resolve_run(s, args.resume)
            filters = catalog.Filters.from_dict(r.filters)
            # every option a check owns is the stored run's (at its default where the run kept none)
            kept = Options.from_dict({k: v for k, v in (r.filters or {}).items() if k in owned_options()})
            asked = {**asked, **{k: getattr(kept, k) for k in owned_options() if k != "pallas_targets"}}
            platforms, run_on = tuple(r.platforms), tuple(r.run_on)
        hs = catalog.select(filters)
    if filters.catalog == "shape_poly":
        from farm.catalog import shape_poly  # noqa: PLC0415  (loaded by select above)

        print(f"farm: {shape_poly.LAST.summary()}", file=sys.stderr)
    if not hs:
        print("farm: no harness matches these filters", file=sys.stderr)
        return 2
    opts = Options(platforms=platforms, run_on=run_on, repeats=args.repeats, crossexec=not args.no_crossexec, **asked)
    cfg = SweepConfig(workers=args.workers, address=args.address, batch=args.batch, timeout_s=args.timeout,
                      modules=filters.modules, env=_config_env(filters.jax_repo), gpu_fraction=args.gpu_fraction,
                      gpu_backend=args.gpu_backend)
    print(f"farm: sweeping {len(hs)} harnesses for {','.join(platforms)}, running on {','.join(run_on)}",
          file=sys.stderr)
    try:
        # the checks asked beside the static stages are kept for --resume (at their defaults: not at all)
        selection = {**filters.to_dict(), **{k: v for k, v in opts.to_dict().items()
                                             if k in owned_options() and k != "pallas_targets"}}
        run_row, stats = sweep(store, hs, options=opts, catalog=filters.catalog, filters=selection,
                               config=cfg, name=args.run_name, resume=args.resume, force=args.force,
                               dims=_dims(args))
    except KeyboardInterrupt:
        from farm.store import queries  # deferred: farm.store.queries (sqlalchemy); not needed by farm --help

        with store.session() as s:
            r = queries.resolve_run(s, args.resume or "latest")
            print(f"farm: interrupted; finished results are kept. Resume with: farm sweep --resume {r.name}",
                  file=sys.stderr)
        return 130
    print(f"farm: run {run_row.name} (id {run_row.id}): {stats.done} run ({stats.downstream_reused} of them "
          f"re-lowered with compile/execute/compare reused), {stats.cached} reused whole, "
          f"{stats.crashed} crashed, {stats.timeouts} timed out in {stats.wall_s:.1f}s; "
          f"peak worker RSS {max(stats.peak_rss.values(), default=0) / 2**20:.0f} MiB", file=sys.stderr)
    _cluster_lines(store, run_row.id)
    print_run(store, str(run_row.id), args.format, max_rows=60)
    url = store.engine.url.render_as_string(hide_password=True)  # the database used: --db, $FARM_DB or the default
    print(f"\nOpen the dashboard:  {_farm_command()} serve --db {url}   then browse http://127.0.0.1:8000/",
          file=sys.stderr)
    return 0


def vjp_order(text: str | int | None) -> int:
    """``--vjp``'s order: 0 (not given), 1 or 2; anything else is one line (``ConfigError``)."""
    orders = tuple(o for o in VJP_ORDERS if o)
    try:
        order = int(str(text if text is not None else 0).strip())
    except ValueError:
        order = -1
    if order not in VJP_ORDERS:
        raise ConfigError(f"--vjp {text}: the farm serializes and judges vjp orders "
                          f"{' and '.join(map(str, orders))} (jax.export serializes any order; "
                          f"each order past 2 doubles the modules exported and is not judged)")
    return order


def checks(args: argparse.Namespace) -> dict[str, Any]:
    """The checks a sweep asks for beside the static stages, each checked, as ``Options``
    fields: --shapes, --pallas-targets, --vjp, --check-determinism (a plain sweep, a version
    sweep and a bisection read them alike)."""
    from farm.catalog.pallas import check_targets  # deferred: reads jax's TPU generations

    shapes = parse_list(args.shapes, SHAPE_KINDS, "shape kind (--shapes)") or ("static",)
    pallas_targets = check_targets(t.strip() for t in (args.pallas_targets or "").split(",") if t.strip())
    picked = {}
    for c in choices():
        picked[c.field] = getattr(args, c.field, None) or c.values[0]
        if picked[c.field] not in c.values:
            raise ConfigError(f"{c.flag} {picked[c.field]}: one of {', '.join(c.values[1:])}")
    return {"shapes": shapes, "pallas_targets": pallas_targets, "vjp": vjp_order(args.vjp), **picked}


def _cluster_lines(store: object, run_id: int) -> None:
    """The run's failure clusters, new and gone (``farm.reports.triage.sweep_lines``); never
    fails the sweep, whose results are stored whatever happens here."""
    from farm.reports import triage  # deferred: farm.store (sqlalchemy); not needed by farm --help

    try:
        with store.session() as s:  # type: ignore[attr-defined]
            lines = triage.sweep_lines(s, run_id)
    except Exception as e:  # noqa: BLE001 - see the docstring
        lines = [f"clusters: not computed ({type(e).__name__}: {e})"]
    for line in lines:
        print(f"farm: {line}", file=sys.stderr)


def _farm_command() -> str:
    """How to call this same farm again: ``.venv/bin/farm`` from a checkout, else its full path."""
    exe = os.path.join(os.path.dirname(sys.executable), "farm")
    if not os.path.exists(exe):
        return "farm"
    rel = os.path.relpath(exe)
    return rel if not rel.startswith("..") else exe


def _dims(args: argparse.Namespace) -> RunDims:
    """This run's dimensions: its series, schedule and slot from the command line, its
    configuration from the environment a configuration sweep started it in."""
    return RunDims(series=args.series, config=os.environ.get("FARM_CONFIG_LABEL") or None, schedule=args.schedule,
                   slot=args.slot)


def _config_env(jax_repo: str | None = None) -> dict[str, str]:
    """Inside a configuration sweep: its settings, for worker processes on any cluster; the
    shape_poly catalog's jax repository, which the workers read their catalog from."""
    repo = {"FARM_JAX_REPO": jax_repo} if jax_repo else {}
    if not os.environ.get("FARM_CONFIG_LABEL"):
        return repo
    from farm.run.configs import KEYS  # noqa: PLC0415  (only in a configuration sweep)

    return {**repo, **{var: os.environ[var] for var, _ in KEYS.values() if var in os.environ}}


def _sweep_configs(args: argparse.Namespace) -> int:
    """One sweep per configuration, each a fresh process (JAX reads these settings at start)."""
    from farm.store.writes import generated_name  # deferred: farm.store (~0.3 s, sqlalchemy); not needed by farm --help

    from farm.run import configs  # noqa: PLC0415  (only here)

    if args.resume:
        raise ConfigError("--config and --resume: resume each configuration's run by its name (NAME@KEY=V)")
    todo = configs.parse(args.config, configs.flag_sets())
    if args.default:
        args.primitive = args.primitive or DEFAULT_PRIMITIVES
        args.dtype = args.dtype or DEFAULT_DTYPES
    filters = filters_from(args)  # checked once, up front
    platforms = parse_targets(args.platforms, LOWERING_PLATFORMS, "platform")
    run_on = parse_targets(args.run_on, DEVICE_KINDS, "device kind (--run-on)")
    platforms += tuple(k for k in run_on if k not in DEVICE_KINDS and k not in platforms)
    base = args.run_name or generated_name("config")  # two started in the same second differ
    each = SweepRequest.from_namespace(args).replace(name=None, resume=None, config=(), jax=None, submit=False,
                                                     dashboard=None, series=base)
    rc, done = configs.sweep_each(todo, each.to_argv()[1:], base, db=getattr(args, "db", None),
                                  selection={"filters": filters.to_dict(), "platforms": list(platforms)})
    print("farm: configuration sweep " + base + ": " + "; ".join(f"{n} (exit {c})" for n, c in done) +
          (f"\nCompare two of them:  farm compare --across-config {args.config[0]} {base}"
           if len(done) > 1 else ""), file=sys.stderr)
    return rc


def _sweep_versions(args: argparse.Namespace) -> int:
    """One standalone run per jax version (each in its own venv), then the cross-version pairs."""
    from farm.store.writes import generated_name  # deferred: farm.store (~0.3 s, sqlalchemy); not needed by farm --help

    from farm import catalog  # deferred: farm.catalog; not needed by farm --help
    from farm.run.versions import matrix, venvs  # deferred: farm.run; not needed by farm --help

    if args.resume or args.address or args.run_on != "cpu":
        raise ConfigError("--jax runs on this host's CPU in one standalone worker per version: without --resume "
                          "(the same command again continues), --address or --run-on")
    todo = venvs.parse(args.jax)
    if args.default:
        args.primitive = args.primitive or DEFAULT_PRIMITIVES
        args.dtype = args.dtype or DEFAULT_DTYPES
    filters = filters_from(args)
    catalog.select(filters)  # unknown names fail here, before anything is installed
    platforms = parse_targets(args.platforms, LOWERING_PLATFORMS, "platform")
    # every check runs in each version's own run; what a version's jax lacks is that run's
    # skipped or not_runnable_here (the cross-version runs carry the static artifacts only)
    opts = Options(platforms=platforms, run_on=("cpu",), repeats=args.repeats, crossexec=not args.no_crossexec,
                   **checks(args))
    store = store_from(args, create=True)
    base = args.run_name or generated_name("versions")  # two started in the same second differ
    done = matrix.sweep(store, todo, base, filters.to_dict(), opts.to_dict(), workers=args.workers or os.cpu_count() or 1,
                          timeout_s=args.timeout, cross=not args.no_cross,
                          dims=RunDims(schedule=args.schedule, slot=args.slot))
    print("farm: version sweep " + base + ": " + "; ".join(f"{n} ({how})" for n, how in done.runs.items()),
          file=sys.stderr)
    print(f"Its table:  farm versions {base}" + (f" --db {args.db}" if args.db else ""), file=sys.stderr)
    return 0
