"""farm fuzz: property-based cases beyond the catalog, run as a run of kind ``fuzz``."""
from __future__ import annotations

import argparse
import json
import sys

from farm.commands import add_db, number, store_from
from farm.platforms import DEVICE_KINDS, LOWERING_PLATFORMS, parse_list, parse_targets
from farm.results import SHAPE_KINDS


def _seconds(text: str) -> float:
    from farm.errors import ConfigError

    t = text.strip().lower()
    scale = 60.0 if t.endswith("m") else 1.0
    try:
        v = float(t.rstrip("sm")) * scale
    except ValueError:
        raise ConfigError(f"--budget {text!r}: expected seconds, e.g. 60s or 5m") from None
    if v <= 0:
        raise ConfigError(f"--budget {text!r}: must be more than 0")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fuzz", help="generate harnesses with hypothesis (shapes, params, values) and run them",
                       description="Draw valid cases per primitive family (deterministic for a --seed), run them "
                                   "through every stage on the normal scheduler as a run of kind fuzz, shrink each "
                                   "failure and write it as a found harness definition (docs/fuzzing.md).")
    p.add_argument("--family", help="comma list: elementwise_unary, elementwise_binary, reduction, shape, dot_conv "
                                    "(default: all)")
    p.add_argument("--primitive", help="comma list of primitives (default: every one of the families)")
    p.add_argument("--dtype", help="comma list (default: float32,bfloat16,float16,int32)")
    p.add_argument("--budget", type=_seconds, default=60.0, help="wall time for drawing and running cases: 60s, 5m")
    p.add_argument("--seed", type=number("--seed", minimum=0), default=0, help="the same seed draws the same cases")
    p.add_argument("--workers", type=number("--workers", minimum=1), default=2, help="worker processes")
    p.add_argument("--cases", type=number("--cases", minimum=1), help="how many cases to draw (default: from the budget)")
    p.add_argument("--found", default="fuzz-found", metavar="DIR",
                   help="where shrunk findings are written, one JSON per cause (copy into harnesses/found/ to keep)")
    p.add_argument("--no-shrink", action="store_true", help="write findings as drawn, unshrunk")
    p.add_argument("--shrink-budget", type=_seconds, default=120.0, help="time for shrinking all causes")
    p.add_argument("--shrink-runs", type=number("--shrink-runs", minimum=1), default=40,
                   help="candidates run per cause while shrinking")
    p.add_argument("--platforms", default="cpu,cuda,rocm,tpu", help="platforms to lower and export for")
    p.add_argument("--run-on", default="cpu", help="device kinds to compile and execute on")
    p.add_argument("--shapes", default="static", metavar="KINDS",
                   help="static, symbolic or static,symbolic: symbolic also exports each drawn case with its "
                        "dimensions symbolic (specs derived from the drawn shape, constraints where JAX needs them) "
                        "and calls it at several sizes")
    p.add_argument("--name", dest="run_name", help="name the run")
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm.fuzz.campaign import Plan, run_campaign, summary_lines
    from farm.results import Options

    platforms = parse_targets(args.platforms, LOWERING_PLATFORMS, "platform")
    run_on = parse_targets(args.run_on, DEVICE_KINDS, "device kind (--run-on)")
    shapes = parse_list(args.shapes, SHAPE_KINDS, "shape kind (--shapes)") or ("static",)
    plan = Plan.parse(args.family, args.dtype, args.primitive, seed=args.seed, budget_s=args.budget,
                      workers=args.workers, cases=args.cases, shrink_runs=args.shrink_runs, shrink_s=0.0 if args.no_shrink else args.shrink_budget,
                      options=Options(platforms=platforms, run_on=run_on, repeats=1, shapes=shapes))
    store = store_from(args, create=True)
    print(f"farm: fuzzing {','.join(plan.rounds_families())} in {','.join(plan.dtypes)} for {args.budget:.0f}s "
          f"(seed {plan.seed}, {plan.workers} workers)", file=sys.stderr)
    res = run_campaign(store, plan, name=args.run_name, found_dir=args.found, log=lambda s: print(f"farm: {s}",
                                                                                                file=sys.stderr))
    if args.format == "json":
        d = res.to_dict()
        for e in d["signatures"]:
            e.pop("signature", None)
            e["platforms"] = sorted(e["platforms"])
        print(json.dumps(d, indent=1))
    else:
        for line in summary_lines(res):
            print(line)
    from farm.commands.sweep import _cluster_lines

    _cluster_lines(store, res.run_id)
    return 0
