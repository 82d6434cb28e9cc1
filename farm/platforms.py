"""Platform names: what we lower for, and what kinds of device can run things."""
from __future__ import annotations

import functools
import os
import sys

from farm.errors import FarmError

#: Platforms every host can lower and export for; device kinds and the platforms each runs
#: natively (one definition each, in the contract).
from farm.results import DEVICE_KINDS, LOWERING_PLATFORMS, NATIVE_PLATFORM  # noqa: E402,F401

#: Ray custom resource advertised by a worker with that device kind (cpu workers still
#: use it, so a head node with CPUs but no slots runs no harness; gpu and tpu workers
#: request Ray's own ``num_gpus`` / ``TPU`` resources, see ``ray_request``).
SLOT_RESOURCE = {kind: f"{kind}_slot" for kind in DEVICE_KINDS}

#: The share of one GPU a gpu worker holds by default (so four actors share one GPU).
GPU_FRACTION = 0.25

#: JAX backends a gpu worker may be pinned to.
GPU_BACKENDS = ("cuda", "rocm")
#: ``--gpu-backend`` choices: a backend, or ``auto`` (no pin: the GPU plugin jax loads decides).
GPU_BACKEND_CHOICES = (*GPU_BACKENDS, "auto")

#: The environment variables ``pinned_env`` sets (a worker reports them back).
PIN_VARS = ("JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION")


def slot_resource(kind: str) -> str:
    """The custom Ray resource of a device kind: ``cpu_slot``, ..., and for a PJRT plugin
    platform ``<platform>_slot`` (``farm worker`` advertises one per plugin device it finds)."""
    return SLOT_RESOURCE.get(kind, f"{kind}_slot")


def ray_request(kind: str, gpu_fraction: float = GPU_FRACTION) -> dict[str, object]:
    """The Ray actor options a worker of device ``kind`` asks for: cpu one CPU (and a
    ``cpu_slot``), gpu a ``num_gpus`` fraction, tpu one of Ray's ``TPU`` resources, a
    PJRT plugin platform its ``<platform>_slot`` (Ray has no resource of its own for it)."""
    if kind == "cpu":
        return {"num_cpus": 1, "resources": {SLOT_RESOURCE["cpu"]: 1}}
    if kind == "gpu":
        if not 0 < gpu_fraction <= 1:
            raise ValueError(f"'gpu_fraction' must be in (0, 1], got {gpu_fraction!r}")
        return {"num_cpus": 0, "num_gpus": gpu_fraction}
    if kind == "tpu":
        return {"num_cpus": 0, "resources": {"TPU": 1}}
    if kind not in DEVICE_KINDS and kind not in LOWERING_PLATFORMS:  # a plugin platform
        return {"num_cpus": 0, "resources": {slot_resource(kind): 1}}
    raise ValueError(f"unknown device kind {kind!r}")


def pinned_env(kind: str, gpu_fraction: float = GPU_FRACTION, gpu_backend: str = "cuda") -> dict[str, str]:
    """Environment that pins a worker to its backend and, on a GPU, to its memory share:
    a cpu worker on a GPU node must not compile on the GPU, and several actors sharing
    one GPU must not each preallocate 75% of it."""
    if kind == "cpu":
        return {"JAX_PLATFORMS": "cpu"}
    if kind == "gpu":
        if gpu_backend not in GPU_BACKEND_CHOICES:
            raise ValueError(f"unknown GPU backend {gpu_backend!r} (one of {', '.join(GPU_BACKEND_CHOICES)})")
        # the fraction is a cap (BFC allocator), allocation grows on demand up to it
        mem = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": f"{0.9 * gpu_fraction:.3f}"}
        # auto: no JAX_PLATFORMS (the GPU plugin jax loads, cuda or rocm, is the default backend;
        # without a GPU the worker finds no gpu device and says so, see ``JobRunner``)
        return mem if gpu_backend == "auto" else {"JAX_PLATFORMS": gpu_backend, **mem}
    if kind == "tpu":
        return {"JAX_PLATFORMS": "tpu"}
    if kind not in DEVICE_KINDS and kind not in LOWERING_PLATFORMS:  # a plugin platform: its own backend
        return {"JAX_PLATFORMS": kind}
    raise ValueError(f"unknown device kind {kind!r}")


def local_device_kinds() -> tuple[str, ...]:
    """Device kinds this process can run natively (imports jax): cpu, gpu, tpu, then the
    PJRT plugin platforms (``plugin_platforms``) that have devices here."""
    import jax

    kinds = set()
    for backend in ("cpu", "gpu", "tpu", *plugin_platforms()):
        try:
            if jax.devices(backend):
                kinds.add(backend)
        except (RuntimeError, AssertionError):  # JAX_PLATFORMS=cuda without CUDA: an AssertionError
            pass
    return tuple(k for k in DEVICE_KINDS if k in kinds) + tuple(sorted(kinds - set(DEVICE_KINDS)))


# --------------------------------------------------------------------------- platforms from the worker
#: The platform names jax registers itself (``jax._src.xla_bridge``): not plugins.
BUILTIN_BACKENDS = frozenset({"cpu", "cuda", "rocm", "tpu", "gpu", "interpreter"})


def platform_of(platform: str, client_platform: str = "", platform_version: str = "") -> str:
    """The lowering platform of a device from what its backend reports: ``device.platform``
    (``"gpu"`` for CUDA and ROCm alike), the PJRT client's ``platform`` name and its
    ``platform_version`` (``"PJRT C API\\ncuda 12080..."``, ``"rocm 60300..."``)."""
    names = {platform.lower(), client_platform.lower()}
    for p in ("rocm", "cuda"):
        if p in names:
            return p
    if "gpu" in names:
        v = platform_version.lower()
        return "rocm" if "rocm" in v or "hip" in v else "cuda"
    return client_platform.lower() or platform.lower()


def backend_platform(kind: str) -> str | None:
    """The platform this process's devices of ``kind`` report (imports jax; None: no such
    device here). A gpu worker says ``cuda`` or ``rocm`` from the plugin it loaded."""
    import jax

    try:
        ds = jax.devices(kind)
    except (RuntimeError, AssertionError):
        return None
    if not ds:
        return None
    client = getattr(ds[0], "client", None)
    return platform_of(ds[0].platform, str(getattr(client, "platform", "") or ""),
                       str(getattr(client, "platform_version", "") or ""))


def _backends_up() -> bool:
    from jax._src import xla_bridge as xb

    return xb.backends_are_initialized()


@functools.cache
def _detected(kind: str) -> str | None:
    return backend_platform(kind)


def native_platform(kind: str) -> str:
    """The platform whose module a worker of device ``kind`` compiles and runs natively.

    cpu and tpu are themselves. gpu is what the worker's backend reports (``cuda`` or
    ``rocm``) once jax's backends are up in this process (a worker's are from its start),
    else the backend it is pinned to (``JAX_PLATFORMS``), else ``cuda``: a driver never
    starts a backend to find out (on a GPU node that would take GPU memory). A PJRT plugin
    kind is its own platform."""
    if kind != "gpu":
        return NATIVE_PLATFORM.get(kind, kind)
    if "jax" in sys.modules and _backends_up() and (found := _detected("gpu")):
        return found
    pinned = os.environ.get("JAX_PLATFORMS", "")
    return pinned if pinned in GPU_BACKENDS else NATIVE_PLATFORM["gpu"]


def plugin_platforms() -> tuple[str, ...]:
    """PJRT plugin platforms registered in this process (imports jax): what the
    ``jax_plugins`` namespace packages and entry points registered with
    ``jax._src.xla_bridge``, less jax's own backends."""
    from jax._src import xla_bridge as xb

    try:
        xb._discover_and_register_pjrt_plugins()
    except Exception:  # a broken plugin is the plugin's problem, not a reason to stop
        pass
    return tuple(sorted(set(xb._backend_factories) - BUILTIN_BACKENDS))


class PluginMissing(FarmError):
    """A --platforms or --run-on name whose PJRT plugin this host lacks."""


def check_targets(platforms: tuple[str, ...], run_on: tuple[str, ...]) -> None:
    """Refuse a ``--platforms``/``--run-on`` name that is neither built in nor a PJRT plugin
    platform registered on this (the lowering) host: jax lowers for a name it does not know
    without complaint, with the default rules, so the module would be meaningless.

    Raises:
        PluginMissing: a platform whose plugin is not installed here.
    """
    foreign = [p for p in (*platforms, *run_on) if p not in LOWERING_PLATFORMS and p not in DEVICE_KINDS]
    if not foreign:
        return
    have = plugin_platforms()
    for p in foreign:
        if p not in have:
            raise PluginMissing(
                f"{p!r} is neither a built-in platform ({', '.join(LOWERING_PLATFORMS)}) nor a PJRT plugin "
                f"platform registered on this host (plugins here: {', '.join(have) or 'none'}): lowering for a "
                f"plugin platform needs its plugin installed on the lowering host too (this one and every "
                f"worker), not only on the device host; install it here (pip install ITS-PLUGIN-PACKAGE) or "
                f"drop {p!r}")


def parse_targets(text: str | None, valid: tuple[str, ...], kind: str, here: bool = True) -> tuple[str, ...]:
    """``parse_list`` for ``--platforms``/``--run-on``: a name that is not built in may be a
    PJRT plugin platform; a near miss of a built-in one is a typo (``UnknownName``). With
    ``here`` (this host lowers) any other name needs its plugin here (``PluginMissing``);
    without (a jobs file for a device host, which checks for itself) it is taken as is."""
    import difflib

    from farm.errors import UnknownName

    items = tuple(dict.fromkeys(s.strip() for s in (text or "").split(",") if s.strip()))
    for item in items:
        if item not in valid and item not in LOWERING_PLATFORMS and difflib.get_close_matches(item, valid, 1, 0.75):
            raise UnknownName(kind, item, valid)
    if here:
        check_targets(tuple(i for i in items if i not in valid), ())
    return items


def parse_list(text: str | None, valid: tuple[str, ...], kind: str) -> tuple[str, ...]:
    """Split a comma list and check each item is valid (raises UnknownName)."""
    from farm.errors import UnknownName

    if not text:
        return ()
    items = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    for item in items:
        if item not in valid:
            raise UnknownName(kind, item, valid)
    return items
