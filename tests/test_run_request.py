"""farm.run.request: one typed SweepRequest, read from and written to a command line."""
from __future__ import annotations

import argparse
import random

import pytest

from farm import cli
from farm.run.request import FLAGS, SweepRequest


def _sweep_parser() -> argparse.ArgumentParser:
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["sweep"]


def _random_request(rng: random.Random) -> SweepRequest:
    """A request whose values the CLI accepts, with each option given or left at its default."""
    pick = {
        "catalog": lambda: rng.choice(["farm", "upstream", "all", "shape_poly"]), "jax_repo": lambda: "/src/jax",
        "primitive": lambda: "exp,sin",
        "group": lambda: "cumsum", "family": lambda: "elementwise_unary", "dtype": lambda: "float32,int8",
        "match": lambda: "exp_*", "modules": lambda: "harnesses.planted", "limit": lambda: rng.randint(1, 50),
        "default": lambda: True, "platforms": lambda: "cpu,tpu", "run_on": lambda: "cpu,gpu",
        "db": lambda: "postgresql+psycopg://u@h/farm", "address": lambda: "127.0.0.1:6379",
        "workers": lambda: rng.randint(1, 8), "gpu_fraction": lambda: rng.choice([0.5, 1.0, 0.125]),
        "gpu_backend": lambda: rng.choice(["rocm", "auto"]), "name": lambda: "nightly", "resume": lambda: "latest",
        "force": lambda: True, "timeout": lambda: rng.choice([1.5, 30.0, 600.0]), "batch": lambda: rng.randint(1, 30),
        "repeats": lambda: rng.randint(1, 9), "crossexec": lambda: False, "format": lambda: "json",
        "shapes": lambda: rng.choice(["symbolic", "static,symbolic"]),
        "pallas_targets": lambda: rng.choice(["tpu:v5e,cuda:triton", "tpu", "triton"]),
        "vjp": lambda: rng.choice(["1", "2"]), "determinism": lambda: rng.choice(["sample", "all"]),
        "compositions": lambda: rng.choice(["representative", "all"]),
        "edges": lambda: rng.choice(["representative", "all"]),
        "config": lambda: tuple(rng.sample(["x64=on,off", "shardy=on", "matmul_precision=highest"], rng.randint(1, 3))),
        "jax": lambda: "0.9.2,0.10.2", "cross": lambda: False, "submit": lambda: True,
        "dashboard": lambda: "http://h:8265", "series": lambda: "cfg", "schedule": lambda: "nightly",
        "slot": lambda: "20260105T0200Z"}
    return SweepRequest(**{f: pick[f]() for f, _, _ in FLAGS if rng.random() < 0.5})


@pytest.mark.parametrize("seed", range(60))
def test_to_argv_and_back_is_the_same_request(seed: int) -> None:
    req = _random_request(random.Random(seed))
    assert SweepRequest.from_argv(req.to_argv()) == req


@pytest.mark.parametrize("seed", range(60, 90))
def test_the_cli_reads_the_request_to_argv_wrote(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_DASHBOARD_ADDRESS", raising=False)
    req = _random_request(random.Random(seed))
    assert SweepRequest.from_namespace(_sweep_parser().parse_args(req.to_argv()[1:])) == req


def test_every_sweep_option_is_part_of_the_request() -> None:
    """A new farm sweep option that SweepRequest does not know would be dropped by schedules,
    --submit and configuration sweeps without a word."""
    flags = {flag for _, flag, _ in FLAGS}
    options = {o for a in _sweep_parser()._actions for o in a.option_strings if o.startswith("--")}
    assert options - {"--help"} == flags


def test_defaults_are_left_out_and_the_run_name_comes_first() -> None:
    assert SweepRequest().to_argv() == ["sweep"]
    argv = SweepRequest(name="n", primitive="exp", crossexec=False, config=("x64=on", "shardy=off")).to_argv()
    assert argv == ["sweep", "--name", "n", "--primitive", "exp", "--no-crossexec",
                    "--config", "x64=on", "--config", "shardy=off"]
