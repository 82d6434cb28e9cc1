"""What one ``farm sweep`` is asked to do, as one typed value: ``SweepRequest``.

A sweep is started from the CLI, from a ``farm.toml`` schedule, as a Ray job
(``--submit``) and, for each configuration of a ``--config`` sweep, as a child process.
Each of those used to rebuild ``farm sweep`` arguments its own way; now each builds a
``SweepRequest`` and asks it for its argv (``to_argv``), and the CLI reads one back
(``from_namespace``). ``from_argv`` is the inverse of ``to_argv`` (tests check the round
trip and that the CLI's own parser reads the same request from the same argv).

Values keep their command-line form (comma lists are strings): the CLI checks them once,
when it parses them (filters, platforms, numeric ranges).
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

#: (field, flag, kind): ``str``/``int``/``float`` take a value, ``on`` is a store_true flag,
#: ``off`` a flag that turns the (default True) field off, ``many`` a repeatable option.
FLAGS: tuple[tuple[str, str, str], ...] = (
    ("name", "--name", "str"), ("resume", "--resume", "str"), ("catalog", "--catalog", "str"), ("jax_repo", "--jax-repo", "str"), ("primitive", "--primitive", "str"), ("group", "--group", "str"),
    ("family", "--family", "str"), ("dtype", "--dtype", "str"), ("match", "--match", "str"),
    ("modules", "--modules", "str"), ("limit", "--limit", "int"), ("default", "--default", "on"),
    ("platforms", "--platforms", "str"), ("run_on", "--run-on", "str"), ("db", "--db", "str"),
    ("address", "--address", "str"), ("workers", "--workers", "int"), ("gpu_fraction", "--gpu-fraction", "float"),
    ("gpu_backend", "--gpu-backend", "str"), ("force", "--force", "on"), ("timeout", "--timeout", "float"), ("batch", "--batch", "int"),
    ("repeats", "--repeats", "int"), ("crossexec", "--no-crossexec", "off"), ("shapes", "--shapes", "str"),
    ("pallas_targets", "--pallas-targets", "str"), ("vjp", "--vjp", "str"),
    ("determinism", "--check-determinism", "str"), ("compositions", "--compositions", "str"),
    ("edges", "--edges", "str"),
    ("format", "--format", "str"),
    ("config", "--config", "many"), ("jax", "--jax", "str"), ("cross", "--no-cross", "off"),
    ("submit", "--submit", "on"), ("dashboard", "--dashboard", "str"), ("series", "--series", "str"),
    ("schedule", "--schedule", "str"), ("slot", "--slot", "str"))
#: The harness-selection fields (``farm.catalog.Filters.parse`` keywords, ``match`` as ``name``).
FILTER_FIELDS = ("catalog", "primitive", "group", "family", "dtype", "match", "modules", "limit", "jax_repo")


@dataclass(frozen=True, slots=True)
class SweepRequest:
    """Every option of ``farm sweep``, with its defaults (None: not given)."""

    catalog: str = "farm"
    jax_repo: str | None = None  # the shape_poly catalog's jax repository
    primitive: str | None = None
    group: str | None = None
    family: str | None = None
    dtype: str | None = None
    match: str | None = None  # the harness-name filter (--match); ``name`` names the run
    modules: str | None = None
    limit: int | None = None
    default: bool = False  # the quick default selection
    platforms: str = "cpu,cuda,rocm,tpu"
    run_on: str = "cpu"
    db: str | None = None
    address: str | None = None
    workers: int | None = None
    gpu_fraction: float = 0.25
    gpu_backend: str = "cuda"
    name: str | None = None
    resume: str | None = None
    force: bool = False
    timeout: float = 120.0
    batch: int = 8
    repeats: int = 3
    crossexec: bool = True
    shapes: str = "static"
    pallas_targets: str | None = None  # the Pallas targets (tpu:v5e, cuda:triton, tpu, triton); None: all
    vjp: str = "0"  # vjp orders to differentiate and judge: 0 (none), 1 or 2
    determinism: str | None = None  # --check-determinism: sample or all (None: off)
    compositions: str | None = None  # --compositions: representative or all (None: off)
    edges: str | None = None  # --edges: representative or all (None: off)
    format: str = "table"
    config: tuple[str, ...] = ()
    jax: str | None = None
    cross: bool = True
    submit: bool = False
    dashboard: str | None = None
    series: str | None = None  # the sweep of several runs this run is one of (set by --config and schedules)
    schedule: str | None = None  # the farm.toml sweep that scheduled it
    slot: str | None = None  # and its slot, YYYYMMDDTHHMMZ

    def replace(self, **kw: Any) -> "SweepRequest":
        return replace(self, **kw)

    def filters(self) -> dict[str, Any]:
        """The selection as ``farm.catalog.Filters.parse`` keywords."""
        return {("name" if f == "match" else f): getattr(self, f) for f in FILTER_FIELDS}

    def to_argv(self) -> list[str]:
        """``["sweep", ...]``: the options that differ from the defaults, in ``FLAGS`` order."""
        out = ["sweep"]
        defaults = SweepRequest()
        for f, flag, kind in FLAGS:
            v = getattr(self, f)
            if v == getattr(defaults, f):
                continue
            if kind == "on" or kind == "off":
                out.append(flag)
            elif kind == "many":
                for item in v:
                    out += [flag, item]
            else:
                out += [flag, _text(v)]
        return out

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> "SweepRequest":
        """The request ``to_argv`` wrote (a leading ``sweep`` is optional). Only the form is
        checked here; the CLI checks values when it parses them."""
        args = list(argv)
        if args[:1] == ["sweep"]:
            args = args[1:]
        p = argparse.ArgumentParser(prog="farm sweep", add_help=False, allow_abbrev=False)
        for f, flag, kind in FLAGS:
            if kind == "on":
                p.add_argument(flag, dest=f, action="store_true")
            elif kind == "off":
                p.add_argument(flag, dest=f, action="store_false")
            elif kind == "many":
                p.add_argument(flag, dest=f, action="append", default=[])
            else:
                p.add_argument(flag, dest=f, type={"int": int, "float": float}.get(kind, str))
        ns = p.parse_args(args)
        got = {f.name: getattr(ns, f.name) for f in fields(cls)}
        got["config"] = tuple(got["config"])
        return cls(**{k: v for k, v in got.items() if v is not None})

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> "SweepRequest":
        """The request of a parsed ``farm sweep`` command line (``farm.commands.sweep``)."""
        got: dict[str, Any] = {}
        for f, _flag, kind in FLAGS:
            dest = {"match": "name", "name": "run_name", "crossexec": "no_crossexec", "cross": "no_cross"}.get(f, f)
            v = getattr(args, dest, None)
            if kind == "off":
                v = not v
            elif kind == "many":
                v = tuple(v or ())
            if v is not None:
                got[f] = v
        return cls(**got)


def _text(v: Any) -> str:
    """A value as the CLI reads it back (``120.0`` stays a float, ``8`` an int)."""
    return repr(v) if isinstance(v, float) else str(v)
