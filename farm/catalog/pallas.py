"""A Pallas kernel as a harness: which backends it is written for (``Kernel``) and the
targets a sweep lowers it for (``Target``: a TPU generation, cuda with Mosaic GPU or Triton,
rocm with Triton or Mosaic GPU).

The harness's own ``fun`` is the kernel in interpret mode (``build(True)``): plain HLO that the
ordinary stages trace, lower for every platform, run on the CPU and compare with the float64
reference. The ``pallas_export`` stage (``farm.pipeline.pallas``) lowers ``build(False)``, the
real kernel, for each target.

The TPU generations are the device kinds the installed jax knows
(``jax._src.pallas.mosaic.tpu_info``), read from its source, not listed here: a jax that learns
a new chip adds a target.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from farm.errors import UnknownName

#: Each backend's custom call: the target a lowering for it must carry.
CUSTOM_CALL = {"mosaic_tpu": "tpu_custom_call", "mosaic_gpu": "mosaic_gpu_v2", "triton": "__gpu$xla.gpu.triton"}
#: The GPU a GPU lowering is told it is for (device kind, cores): a kernel that asks the default
#: device (the Mosaic GPU matmul asks for the SM count) would otherwise ask this host's CPU.
GPU_DEVICES = {"cuda": ("NVIDIA H100 80GB HBM3", 132), "rocm": ("AMD Instinct MI300X", 304)}
#: The MI300X's architecture: how jax 0.12's Triton lowering (``pallas.triton.gpu_info``) knows an
#: abstract ROCm device; it refuses a marketing name ("No supported GPU devices found").
ROCM_ARCH = "gfx942"
#: The GPU targets: (platform, backend).
GPU_TARGETS = (("cuda", "mosaic_gpu"), ("cuda", "triton"), ("rocm", "triton"), ("rocm", "mosaic_gpu"))


@dataclass(frozen=True, slots=True)
class Target:
    """One lowering target. ``label`` names it in records, limitations and ``--pallas-targets``:
    "tpu:v5e" (the generation, ``device_kind`` "TPU v5 lite"), "cuda:triton", "rocm:mosaic_gpu"."""

    platform: str  # tpu | cuda | rocm
    backend: str  # mosaic_tpu | mosaic_gpu | triton
    generation: str = ""  # tpu only: jax's ChipVersion ("v5e", "7x")
    device_kind: str = ""  # the device kind the lowering is told ("TPU v5 lite", "NVIDIA H100 80GB HBM3")
    cores: int = 1  # and its core count (TensorCores; a GPU's SMs or CUs)

    @property
    def label(self) -> str:
        return f"{self.platform}:{self.generation or self.backend}"

    @property
    def custom_call(self) -> str:
        return CUSTOM_CALL[self.backend]


@dataclass(frozen=True, slots=True)
class Kernel:
    """What a Pallas harness is made of.

    ``build(interpret)``: the function calling the kernel (``interpret=True``: JAX's HLO
    interpreter, which runs on the CPU). ``backends``: the backends it is written for
    (``mosaic_tpu``, ``mosaic_gpu``, ``triton``); a kernel with no compiler parameters runs
    on all three. ``source``: where it comes from (a module of the jax wheel, or ``farm``).
    ``symbolic``: per dynamic argument, a symbolic shape ("w, h") it is exported at instead
    of its concrete one (a symbolic grid). ``interpretable``: JAX's HLO interpreter runs it
    (the Mosaic GPU kernels' TMA copies have no interpreter rule: their harness's ``fun`` is
    the real kernel, told it is on ``GPU_DEVICES["cuda"]``, and nothing checks their numbers here).
    ``reference``: the jnp reference the kernel ships with (``mha_reference``...), called with
    the harness's dynamic arguments: a second check of the interpret-mode kernel, beside the
    farm's float64 one (the ``pallas_reference`` stage).
    """

    build: Callable[[bool], Callable[..., Any]]
    backends: tuple[str, ...]
    source: str = "farm"
    symbolic: tuple[str, ...] = ()
    interpretable: bool = True
    reference: Callable[..., Any] | None = field(default=None, compare=False)
    #: the same kernel written with ``plgpu.kernel`` (a function of no argument giving the function
    #: calling it), exported for the Mosaic GPU targets where this jax's ``pl.pallas_call`` has no
    #: Mosaic GPU lowering (jax 0.12: ``farm.stages.pallas.NO_MOSAIC_GPU_SWITCH``); None: skipped there
    mosaic_gpu: Callable[[], Callable[..., Any]] | None = field(default=None, compare=False)
    #: what the custom call's configuration must hold once lowered ({"<backend>:<path>": value}, e.g.
    #: "mosaic_tpu:custom_call_config.internal_scratch_in_bytes": 65536; ``farm.stages.pallas.configuration``
    #: names the paths): a parameter that lowers without an error but never reaches the backend is wrong
    config: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: exported under ``pl.pallas_export_experimental(dynamic_shapes=True)``: its symbolic shapes reach
    #: the kernel itself (Mosaic TPU's dynamic-shape export) instead of being refused
    dynamic_shapes: bool = False

    def __post_init__(self) -> None:
        for b in self.backends:
            if b not in CUSTOM_CALL:
                raise UnknownName("pallas backend", b, tuple(CUSTOM_CALL))

    def describe(self) -> str:
        return repr((self.backends, self.source, self.symbolic, self.interpretable, self.reference is not None)
                    + ((True,) if self.mosaic_gpu is not None else ())
                    + ((sorted(self.config.items(), key=str),) if self.config else ())
                    + (("dynamic_shapes",) if self.dynamic_shapes else ()))


def interpreting(fun: Callable[..., Any], interpret: bool) -> Callable[..., Any]:
    """``fun`` (calling a Mosaic TPU kernel that takes no ``interpret`` argument) with every
    ``pallas_call`` it traces run by JAX's HLO interpreter when ``interpret``: plain HLO, which
    exports for every platform (TPU interpret mode, ``InterpretParams``, does not: its callbacks
    refuse a multi-platform lowering)."""
    if not interpret:
        return fun

    def interpreted(*args: Any) -> Any:
        from jax.experimental.pallas import tpu as pltpu

        with pltpu.force_tpu_interpret_mode(True):  # True: the HLO interpreter, not InterpretParams
            return fun(*args)

    interpreted.__wrapped__ = fun  # type: ignore[attr-defined]
    return interpreted


@lru_cache(maxsize=1)
def generations() -> tuple[Target, ...]:
    """A TPU target per chip the installed jax knows: the first device kind each
    ``chip_version_from_device_kind`` case names ("TPU v5e" | "TPU v5 lite": "TPU v5e")."""
    import ast
    import inspect

    from jax._src.pallas.mosaic import tpu_info

    # jax 0.9 and newer name each kind's chip in chip_version_from_device_kind; jax 0.8 only in
    # get_tpu_info's cases, as its TpuInfo's chip_version=ChipVersion.<NAME>
    lookup = getattr(tpu_info, "chip_version_from_device_kind", None)
    tree = ast.parse(inspect.getsource(lookup or tpu_info.get_tpu_info))
    out: list[Target] = []
    for case in (n for n in ast.walk(tree) if isinstance(n, ast.match_case)):
        kinds = [p.value.value for p in ast.walk(case.pattern)
                 if isinstance(p, ast.MatchValue) and isinstance(p.value, ast.Constant)]
        if not kinds:
            continue
        if lookup is not None:
            chip = lookup(kinds[0])
        else:
            named = [k.value.attr for n in case.body for k in ast.walk(n)
                     if isinstance(k, ast.keyword) and k.arg == "chip_version" and isinstance(k.value, ast.Attribute)]
            chip = tpu_info.ChipVersion[named[0]] if named else None
        if chip is not None:
            out.append(Target("tpu", "mosaic_tpu", chip.value, kinds[0], 1))
    return tuple(out)


def all_targets() -> tuple[Target, ...]:
    return generations() + tuple(Target(p, b, "", *gpu_device(p)) for p, b in GPU_TARGETS)


@lru_cache(maxsize=None)
def gpu_device(platform: str) -> tuple[str, int]:
    """``GPU_DEVICES[platform]`` as the installed jax names it: the ROCm device by its
    architecture where jax reads GPU information from the device kind (0.12 and later)."""
    import importlib.util

    kind, cores = GPU_DEVICES[platform]
    if platform == "rocm" and importlib.util.find_spec("jax._src.pallas.triton.gpu_info") is not None:
        return ROCM_ARCH, cores
    return kind, cores


def abstract_device(kind: str, cores: int | None, platform: str) -> Any:
    """An ``AbstractDevice`` of this device kind (with its platform where the installed jax
    takes one: jax 0.9.2's has the device kind and core count only)."""
    from jax._src import mesh as mesh_lib

    try:
        return mesh_lib.AbstractDevice(device_kind=kind, num_cores=cores, platform=platform)
    except TypeError:
        return mesh_lib.AbstractDevice(device_kind=kind, num_cores=cores)


def on_device(fun: Callable[..., Any], platform: str) -> Callable[..., Any]:
    """``fun`` traced as if on ``platform``'s GPU (``GPU_DEVICES``): for a kernel that asks the
    default device about itself at trace time."""
    kind, cores = gpu_device(platform)

    def told(*args: Any) -> Any:
        import jax

        device = abstract_device(kind, cores, platform)
        with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("pallas",), abstract_device=device)):
            return fun(*args)

    told.__wrapped__ = fun  # type: ignore[attr-defined]
    return told


def check_targets(labels: Iterable[str]) -> tuple[str, ...]:
    """``labels`` as given (``--pallas-targets``), each a target label, a platform ("tpu": every
    generation) or a backend ("triton"); anything else is ``UnknownName``."""
    known = {t.label for t in all_targets()} | {t.platform for t in all_targets()} | set(CUSTOM_CALL)
    out = tuple(labels)
    for label in out:
        if label not in known:
            raise UnknownName("pallas target", label, sorted(known))
    return out


def targets(kernel: Kernel, platforms: Iterable[str], only: Iterable[str] = ()) -> tuple[Target, ...]:
    """The targets of ``kernel`` among ``platforms`` (a sweep's --platforms) and ``only``
    (labels, platforms or backends; empty: all). A backend the kernel is not written for is
    no target (a TPU kernel's compiler parameters cannot be lowered for a GPU)."""
    wanted = set(check_targets(only))
    ps = set(platforms)
    return tuple(t for t in all_targets()
                 if t.backend in kernel.backends and t.platform in ps
                 and (not wanted or wanted & {t.label, t.platform, t.backend}))
