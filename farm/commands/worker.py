"""farm worker / farm jobs: standalone workers (no Ray) and cluster nodes."""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys

from farm.commands import add_db, add_filters, filters_from, number, out_file, store_from
from farm.errors import ConfigError
from farm.platforms import DEVICE_KINDS, LOWERING_PLATFORMS, parse_list, parse_targets
from workers.node import node_command


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="run a worker: standalone (jobs file → bundle) or as a Ray cluster node",
                       description="--standalone runs a jobs file without Ray and writes a results bundle for "
                                   "`farm import`. --address joins a Ray cluster as a node: cpu_slot for CPU workers, "
                                   "Ray's own GPU (--num-gpus) and TPU resources for accelerator workers.")
    p.add_argument("--standalone", action="store_true")
    p.add_argument("--jobs", help="jobs file (from `farm jobs`)")
    p.add_argument("--out", type=out_file("--out"), help="results bundle to write (.json.gz)")
    p.add_argument("--address", help="Ray head address to join (cluster node mode)")
    p.add_argument("--slots", type=number("--slots", minimum=1), help="worker slots to advertise (default: cores)")
    p.add_argument("--workers", type=number("--workers", minimum=1), default=1,
                   help="standalone: child processes running harnesses in parallel (each isolated)")
    p.add_argument("--deadline", type=number("--deadline", float, above=0), default=None,
                   help="standalone: start no new harness after this many seconds; the bundle says which ran")
    p.add_argument("--num-gpus", type=number("--num-gpus", minimum=0), default=None,
                   help="GPUs to declare to Ray (default: those jax finds here)")
    p.add_argument("--tag", action="append", default=[],
                   help="extra device tag to advertise without the device (tests only), e.g. tpu")
    p.set_defaults(func=run)
    j = sub.add_parser("jobs", help="write a jobs file for a standalone worker")
    add_filters(j)
    j.add_argument("--platforms", default="cpu,cuda,rocm,tpu")
    j.add_argument("--run-on", default="cpu")
    j.add_argument("--timeout", type=number("--timeout", float, above=0), default=120.0,
                   help="per-harness time limit in seconds")
    j.add_argument("--repeats", type=number("--repeats", minimum=1), default=3,
                   help="timed executions per harness")
    j.add_argument("--no-modules", action="store_true",
                   help="do not keep per-platform module texts in the bundle (smaller bundles)")
    j.add_argument("--priors-from", metavar="RUN",
                   help="carry this run's serialized exports, inputs and CPU outputs, so the device host "
                        "also runs the CPU host's artifacts (the xhost stage)")
    j.add_argument("--keep-artifacts", default=None, metavar="KINDS",
                   help="artifact kinds the bundle keeps (comma list of export,module,io; default all)")
    j.add_argument("--per-bundle", type=number("--per-bundle", minimum=1), default=None,
                   help="split the results into bundles of at most N harnesses (device-host file size limits)")
    add_db(j)
    j.add_argument("--out", required=True, type=out_file("--out"), help="jobs file (.json, or .json.gz to compress)")
    j.set_defaults(func=make_jobs)


def make_jobs(args: argparse.Namespace) -> int:
    from farm import catalog  # deferred: farm.catalog; not needed by farm --help

    f = filters_from(args)
    hs = catalog.select(f)
    fps = [h.fingerprint for h in hs]
    # the device host lowers, and checks that it has any plugin platform named (PluginMissing)
    platforms = parse_targets(args.platforms, LOWERING_PLATFORMS, "platform", here=False)
    run_on = parse_targets(args.run_on, DEVICE_KINDS, "device kind", here=False)
    platforms += tuple(k for k in run_on if k not in DEVICE_KINDS and k not in platforms)
    doc: dict = {"catalog": f.catalog, "modules": list(f.modules), "filters": f.to_dict(),
                 "fingerprints": fps, "names": [h.name for h in hs], "timeout_s": args.timeout,
                 "options": {"platforms": list(platforms), "run_on": list(run_on),
                             "repeats": args.repeats, "keep_modules": not args.no_modules}}
    if args.keep_artifacts is not None:
        doc["keep_artifacts"] = list(parse_list(args.keep_artifacts, ("export", "module", "io"), "artifact kind"))
    if args.per_bundle:
        doc["per_bundle"] = args.per_bundle
    if args.priors_from:
        from farm.run.bundles import priors  # deferred: farm.run.bundles (jax export); not needed by farm --help

        doc["priors"] = priors(store_from(args), args.priors_from, fps, doc["names"])
    opener = gzip.open if args.out.endswith(".gz") else open
    with opener(args.out, "wt") as fh:
        json.dump(doc, fh)
    extra = f", {len(doc['priors'])} with the CPU host's artifacts" if "priors" in doc else ""
    print(f"farm: wrote {len(hs)} jobs to {args.out}{extra}")
    return 0


def run(args: argparse.Namespace) -> int:

    if args.standalone:
        if not (args.jobs and args.out):
            raise ConfigError("--standalone needs --jobs FILE and --out BUNDLE")
        from workers.standalone import run_jobs  # deferred: workers.standalone (jax); not needed by farm --help

        counts = run_jobs(args.jobs, args.out, workers=args.workers, deadline_s=args.deadline)
        print(f"farm: ran {counts['run']} of {counts['jobs']} harnesses ({counts['missing']} unknown here, "
              f"{counts['unrun']} not started before the deadline) in {counts['seconds']:.0f}s; "
              f"bundle {' '.join(counts['bundles'])}")
        return 0
    if args.address:

        cmd = node_command(args.address, args.slots, args.tag, args.num_gpus)
        print("farm: " + " ".join(cmd), file=sys.stderr)
        ray = shutil.which("ray") or os.path.join(os.path.dirname(sys.executable), "ray")
        return subprocess.call([ray] + cmd[1:])
    raise ConfigError("say --standalone (with --jobs/--out) or --address HEAD")
