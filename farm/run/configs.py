"""Configurations as a sweep dimension: x64, the partitioner, the default matmul
precision, named XLA flag sets and ``jax.export``'s calling-convention version.

A configuration is a set of JAX/XLA environment settings; ``farm sweep --config
x64=on,off --config shardy=on,off`` sweeps the selection once per combination, each in a
fresh driver process with that environment (JAX reads these flags when it starts, and the
upstream catalog is built differently with x64 on), one run per configuration named
``NAME@x64=on,shardy=off``. The workers get the same environment (``SweepConfig.env``),
and the result keys include it (``farm.cache.hermetic.ENV_PREFIXES``), so no whole
outcome is reused across configurations; compile, execute and compare are, wherever a
configuration makes the same modules from the same inputs (``farm.cache.key.downstream_key``).
``farm compare --across-config x64=off,on NAME`` compares two configurations of one sweep.
"""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from farm.errors import ConfigError


def calling_conventions() -> dict[str, str]:
    """The calling-convention versions the installed jax exports and reads (9 and 10 on jax
    0.10.2): every artifact of a ``cc=`` configuration is exported, serialized,
    deserialized and run under that version (``export_test.py`` runs its ordered-effects
    tests at each one)."""
    from farm.stages import compat

    lo, hi = compat.calling_convention_range()
    return {str(v): str(v) for v in range(lo, hi + 1)}


#: key -> (environment variable, {value: setting}, or a function giving them from what is
#: installed); None: any value, passed through
KEYS: dict[str, tuple[str, dict[str, str] | Callable[[], dict[str, str]] | None]] = {
    "x64": ("JAX_ENABLE_X64", {"on": "1", "off": "0"}),
    "shardy": ("JAX_USE_SHARDY_PARTITIONER", {"on": "1", "off": "0"}),
    "matmul_precision": ("JAX_DEFAULT_MATMUL_PRECISION",
                         {v: v for v in ("default", "high", "highest", "bfloat16", "tensorfloat32", "float32")}),
    "xla_flags": ("XLA_FLAGS", None),
    "cc": ("JAX_EXPORT_CALLING_CONVENTION_VERSION", calling_conventions),
}


@dataclass(frozen=True)
class Config:
    """One configuration: its label (``x64=on,shardy=off``) and its environment."""

    label: str
    env: dict[str, str]

    def run_name(self, base: str) -> str:
        return f"{base}@{self.label}"


def parse(specs: list[str], flag_sets: dict[str, str] | None = None) -> list[Config]:
    """Every combination of ``KEY=V1,V2`` specs (cartesian product, in the order given)."""
    axes: list[list[tuple[str, str, str, str]]] = []
    seen: set[str] = set()
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or not values.strip():
            raise ConfigError(f"--config {spec!r}: expected KEY=VALUE[,VALUE...] (keys: {', '.join(KEYS)})")
        if key not in KEYS:
            raise ConfigError(f"--config: unknown key {key!r} (valid: {', '.join(KEYS)})")
        if key in seen:
            raise ConfigError(f"--config: {key} given twice")
        seen.add(key)
        var, allowed = KEYS[key]
        axis = []
        for v in (x.strip() for x in values.split(",") if x.strip()):
            axis.append((key, v, var, _setting(key, v, allowed, flag_sets or {})))
        axes.append(axis)
    return [Config(",".join(f"{k}={v}" for k, v, _, _ in combo), {var: s for _, _, var, s in combo})
            for combo in itertools.product(*axes)]


def _setting(key: str, value: str, allowed: dict[str, str] | Callable[[], dict[str, str]] | None,
             flag_sets: dict[str, str]) -> str:
    if callable(allowed):
        allowed = allowed()
    if allowed is not None:
        if value not in allowed:
            raise ConfigError(f"--config {key}: unknown value {value!r} (valid: {', '.join(allowed)})")
        return allowed[value]
    if value == "none":
        return ""
    if value not in flag_sets:
        raise ConfigError(f"--config xla_flags: no flag set named {value!r} in farm.toml [xla_flags] "
                          f"(defined: {', '.join(flag_sets) or 'none'}; 'none' clears XLA_FLAGS)")
    return flag_sets[value]


def flag_sets(path: str | os.PathLike[str] = "farm.toml") -> dict[str, str]:
    """The named XLA flag sets of ``[xla_flags]`` in ``path`` (none if there is no file)."""
    p = Path(path)
    if not p.exists():
        return {}
    try:
        table = tomllib.loads(p.read_text()).get("xla_flags", {})
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: {e}") from None
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise ConfigError(f"{p}: [xla_flags] maps names to flag strings, e.g. fast = \"--xla_cpu_enable_fast_math=true\"")
    return dict(table)


def sweep_each(configs: list[Config], argv: list[str], base: str, db: str | None = None,
               selection: dict[str, Any] | None = None) -> tuple[int, list[tuple[str, int]]]:
    """Run ``farm sweep ARGV --name BASE@LABEL`` once per configuration, each in a fresh
    process with its environment; (worst exit status, [(run name, status)]).

    The same command again continues: a configuration whose run finished is kept (exit 0),
    one whose run was interrupted is resumed (``--resume BASE@LABEL``). A finished run whose
    selection (``selection``: the filters and platforms it was asked for) differs is refused,
    never passed off as this sweep's."""
    done = []
    for cfg in configs:
        name = cfg.run_name(base)
        stored = _stored(db, name)
        if stored is not None and selection is not None and stored[1] != selection:
            raise ConfigError(f"run {name} exists with another selection ({_differs(stored[1], selection)}): "
                              "give this configuration sweep another --name")
        if stored is not None and stored[0] == "finished":
            print(f"farm: configuration {cfg.label}: run {name} finished earlier: kept", file=sys.stderr, flush=True)
            done.append((name, 0))
            continue
        print(f"farm: configuration {cfg.label}: run {name}" + (" (resumed)" if stored else ""),
              file=sys.stderr, flush=True)
        env = {**os.environ, **cfg.env, "FARM_CONFIG_LABEL": cfg.label}
        tail = ["--resume", name] if stored else ["--name", name]
        rc = subprocess.run([sys.executable, "-m", "farm", "sweep", *argv, *tail], env=env).returncode
        done.append((name, rc))
    return max((rc for _, rc in done), default=0), done


def _stored(db: str | None, name: str) -> tuple[str, dict[str, Any]] | None:
    """(status, {"filters", "platforms"}) of the run called ``name``, or None."""
    from sqlalchemy import select  # deferred: sqlalchemy; only when sweeping configurations

    from farm.store import open_store
    from farm.store.models import Run

    store = open_store(db)
    try:
        with store.session() as s:
            run = s.scalar(select(Run).where(Run.name == name))
            if run is None:
                return None
            return run.status, {"filters": dict(run.filters or {}), "platforms": list(run.platforms or [])}
    finally:
        store.dispose()


def _differs(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted({*a.get("filters", {}), *b.get("filters", {})})
    diff = [k for k in keys if a.get("filters", {}).get(k) != b.get("filters", {}).get(k)]
    diff += ["platforms"] * (a.get("platforms") != b.get("platforms"))
    return ", ".join(diff) or "?"
