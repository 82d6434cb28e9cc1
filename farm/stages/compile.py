"""compile: a lowered module on the local backend; cost and memory analysis."""
from __future__ import annotations

import io
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.stages.lower import Lowered
from farm.stages.record import Timer, failure
from farm.results import Record

#: Error text meaning "this module calls something this backend does not have" (a
#: platform-only custom call, e.g. cuSOLVER's ``cusolver_potrf_ffi`` compiled on the host):
#: the module cannot run here, which says nothing about whether it is right. XLA reports a
#: missing FFI handler at compile time or only when the executable first runs.
NOT_RUNNABLE_MARKERS = ("custom call", "custom_call", "No registered implementation",
                        "Unsupported platform", "not supported on this platform",
                        "No FFI handler registered for")
_MISSING_HANDLER = re.compile(r"No FFI handler registered for (\S+)")

#: How the farm compiles what it runs only to check values (vjp pullbacks, symbolic calls at
#: each size and the static lowerings they are held against): without LLVM optimization and
#: with XLA:CPU's elemental emitters instead of its fusion emitters, a small module compiles
#: in ~15 ms instead of ~36; and the LLVM module in one piece (XLA splits it to compile the
#: parts on its own threads, which on this 2-core host costs more than it saves: a symbolic
#: call's program in 23 ms instead of 32). Those stages judge what an export computes, not
#: XLA's optimizer: the compile stage judges that, at XLA's defaults. Records of those stages
#: carry it.
CHECK_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False,
                                 "xla_cpu_parallel_codegen_split_count": 1}
_CHECKED: OrderedDict[str, Any] = OrderedDict()  # module bytecode digest -> executable (clear_checked)
#: CHECK_OPTIONS this process's XLA does not know (jaxlib 0.12 has no xla_cpu_use_fusion_emitters):
#: left out from the first refusal on
_UNKNOWN_OPTIONS: set[str] = set()
_NO_SUCH_OPTION = re.compile(r"No such compile option: '(\w+)'")


_PROBED = False


def check_options() -> dict[str, Any]:
    """The CHECK_OPTIONS this process's XLA takes (what the records of those stages carry):
    asked of XLA:CPU once, by compiling a one-op program with them, so a record written before
    the first real compile names the same options as one written after it."""
    global _PROBED
    if not _PROBED:
        _PROBED = True
        import jax

        if jax.default_backend() == "cpu":
            try:
                _compile_checked(jax.jit(lambda x: x + 1).lower(np.float32(0)))
            except Exception:  # noqa: BLE001 - only a refused option is learned from
                pass
    return {k: v for k, v in CHECK_OPTIONS.items() if k not in _UNKNOWN_OPTIONS}


def _compile_checked(lowered: Any) -> Any:
    """``lowered`` compiled on XLA:CPU with ``check_options()``; an option this XLA refuses
    ("No such compile option") is left out from then on and the compile tried again."""
    while True:
        try:
            return lowered.compile(compiler_options=check_options())
        except Exception as e:
            m = _NO_SUCH_OPTION.search(str(e))
            if m is None or m.group(1) not in CHECK_OPTIONS or m.group(1) in _UNKNOWN_OPTIONS:
                raise
            _UNKNOWN_OPTIONS.add(m.group(1))

#: A LAPACK custom call's line in a module's text (StableHLO or HLO). jaxlib 0.10.2's batched
#: LAPACK kernels split the batch over XLA:CPU's intra-op pool and block one of its threads
#: until the pieces are done (``jax::ParallelBatchMap``); two such calls running side by side
#: on a 2-thread pool (this host's) each wait for pieces that no free thread is left to run,
#: forever (docs/findings.md). A program the farm puts together of independent copies (sizes,
#: the static lowering beside the call) runs them side by side, so a module whose LAPACK calls
#: jaxlib splits is never copied into one.
LAPACK_CALL = re.compile(r"""^.*(custom_call_target\s*=\s*|stablehlo\.custom_call\s+@)"?lapack_.*$""", re.M)
_SHAPES = re.compile(r"tensor<((?:[0-9?]+x)+)[a-z]|\b[a-z]+[0-9]*\[([0-9,]*)\]")
#: jaxlib splits a batch only where batch x cost per matrix reaches 2e5 flops
#: (``kMinWorkPerTask``); its costs per matrix are at most 30 m n min(m, n) (a complex SVD).
_SPLIT_FLOPS, _MAX_COST = 200_000, 30


def side_by_side_safe(text: str) -> bool:
    """Whether copies of the module ``text`` may run side by side in one program: none of its
    LAPACK calls is batched enough for jaxlib to split it (a dimension not known: unsafe;
    the compiled HLO knows them all)."""
    for line in LAPACK_CALL.finditer(text):
        for mlir, hlo in _SHAPES.findall(line.group(0)):
            d = mlir.rstrip("x").split("x") if mlir else [x for x in hlo.split(",") if x]
            if "?" in d:
                return False
            if len(d) < 3:  # one matrix, or a vector per matrix: nothing to split
                continue
            n = [int(x) for x in d]
            batch = int(np.prod(n[:-2]))
            if batch > 1 and batch * _MAX_COST * n[-2] * n[-1] * max(n[-2:]) >= _SPLIT_FLOPS:
                return False
    return True


def checked_jit(jitted: Any, *args: Any) -> Any:
    """``jitted(*args)`` (a ``jax.jit`` function, its shardings and donation as given) compiled with
    ``CHECK_OPTIONS``: what calls judging lowering and composition rather than XLA's optimizer
    use (no LLVM optimization: about a third of the compile)."""
    import jax

    lowered = jitted.lower(*args)
    return (_compile_checked(lowered) if jax.default_backend() == "cpu" else lowered.compile())(*args)


def checked_call(fun: Any, *args: Any) -> Any:
    """``fun(*args)`` under ``jax.jit``, compiled with ``CHECK_OPTIONS`` on the CPU; an executable is
    reused for the same module (its bytecode) and the same arguments' types (the judge's static
    lowering at one size, held against every platform's call at that size), up to 64 of them."""
    import jax

    lowered = jax.jit(fun).lower(*args)
    return _executable(lowered, _bytecode(lowered))(*args)


def _bytecode(lowered: Any) -> bytes:
    """The lowered module's MLIR bytecode: what it is, locations included, in a fifth of the
    time printing it as text takes (a symbolic call's program: ~4 ms against ~20)."""
    out = io.BytesIO()
    lowered.compiler_ir("stablehlo").operation.write_bytecode(out)
    return out.getvalue()


def _executable(lowered: Any, module: bytes) -> Any:
    import hashlib

    import jax

    cpu = jax.default_backend() == "cpu"  # a GPU's native call: its defaults
    # the module alone is not the executable's signature: an argument the module does not use
    # is pruned from it, but the executable still checks its type
    key = hashlib.sha256(module + f"\n{lowered.args_info}\n{lowered.in_tree}".encode()).hexdigest()
    exe = _CHECKED.get(key)
    if exe is None:
        exe = _compile_checked(lowered) if cpu else lowered.compile()
        _CHECKED[key] = exe
        while len(_CHECKED) > 64:
            _CHECKED.popitem(last=False)
    else:
        _CHECKED.move_to_end(key)
    return exe


def checked_calls(fun: Any, arg_lists: list[list[Any]], *more: Any) -> list[Any]:
    """``[fun(*args) for args in arg_lists]`` as one program, compiled once (``checked_call``):
    a symbolic module called at three sizes is one compile, not three. ``more``: functions of
    the same arguments computed in the same program (the static lowering beside the call):
    each result is then the tuple ``(fun(*args), *(m(*args) for m in more))``. Where the
    compiled program holds a LAPACK call jaxlib splits (``side_by_side_safe``), each function
    at each argument list gets a program of its own instead. Raises where any of them does;
    the caller then calls them one by one to see which."""
    import jax

    funs = (fun, *more)
    counts = [len(a) for a in arg_lists]

    def at(*args: Any) -> Any:
        return tuple(f(*args) for f in funs) if more else fun(*args)

    def each(*flat: Any) -> list[Any]:
        out, i = [], 0
        for c in counts:
            out.append(at(*flat[i:i + c]))
            i += c
        return out

    flat = tuple(x for a in arg_lists for x in a)
    lowered = jax.jit(each).lower(*flat)
    module = _bytecode(lowered)
    exe = _executable(lowered, module)
    if (len(arg_lists) > 1 or more) and b"lapack_" in module and not side_by_side_safe(exe.as_text()):
        apart = [[checked_call(f, *a) for f in funs] for a in arg_lists]
        return [tuple(r) if more else r[0] for r in apart]
    return exe(*flat)


def clear_checked() -> None:
    """Drop ``checked_call``'s executables (a worker clearing its caches)."""
    _CHECKED.clear()


def not_runnable(rec: Record, message: str | None = None) -> Record:
    """``rec`` as ``not_runnable_here`` if its error (or the full exception ``message``)
    says the module cannot run on this backend, with the missing custom-call target as a
    fact; else unchanged."""
    text = (rec.error or "") if message is None else message
    if rec.status != "error" or not any(m in text for m in NOT_RUNNABLE_MARKERS):
        return rec
    missing = _MISSING_HANDLER.search(text)
    facts = {**rec.facts, "missing_handler": missing.group(1)} if missing else rec.facts
    return rec.with_status("not_runnable_here", facts=facts)


@dataclass(frozen=True, slots=True)
class Executable:
    """What execute needs of a compile (``Compiled.handle``; never stored)."""

    executable: Any  # jax.stages.Compiled, called with the dynamic arguments


@dataclass(frozen=True, slots=True)
class Compiled(Record):
    """metrics: flops, transcendentals, bytes accessed, memory sizes; ``handle`` is an ``Executable``."""


def _cost(compiled: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        cost = compiled.cost_analysis()
        if isinstance(cost, list):
            cost = cost[0] if cost else {}
        for key, name in (("flops", "flops"), ("transcendentals", "transcendentals"),
                          ("bytes accessed", "bytes_accessed")):
            if cost and key in cost:
                out[name] = float(cost[key])
    except Exception:
        pass
    try:
        mem = compiled.memory_analysis()
        for attr in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                     "generated_code_size_in_bytes", "peak_memory_in_bytes"):
            v = getattr(mem, attr, None)
            if v is not None:
                out[attr.replace("_in_bytes", "_bytes")] = float(v)
    except Exception:
        pass
    return out


def run(lowered: Lowered, stage: str = "compile") -> Compiled:
    """Compile on this process's default backend (stage="crossexec" for foreign modules)."""
    if not lowered.ok:
        return Compiled(stage, lowered.platform, "skipped", error="lower did not succeed")
    timer = Timer()
    try:
        with timer():
            compiled = lowered.handle.lowered.compile()
        return Compiled(stage, lowered.platform, "ok", timer.seconds,
                        metrics={"compile_s": timer.seconds, **_cost(compiled)}, handle=Executable(compiled))
    except Exception as e:
        rec = failure(Compiled, stage, lowered.platform, e, timer.seconds)
        if stage == "compile" and lowered.platform == "cpu" and _backend() == "cpu":
            return rec  # a CPU module on the CPU backend: a missing handler is a bug, never "cannot run here"
        return not_runnable(rec, str(e))


def _backend() -> str:
    import jax

    return jax.default_backend()
