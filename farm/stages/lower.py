"""lower: per-platform lowering from any host (``traced.lower(lowering_platforms=(p,))``)."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from farm.stages.record import Timer, failure

from farm.results import Record
from farm.stages.trace import Traced

#: A host callback (``jax.debug.print``, ``io_callback``...) lowered for a platform whose
#: backend this host does not have: JAX lowers callbacks against the backend, so the
#: module cannot be made here; it says nothing about the platform (``not_runnable_here``).
NO_BACKEND = re.compile(r"the platform for the specified backend \w+ is different from the lowering platform")


@dataclass(frozen=True, slots=True)
class LoweredModule:
    """What later stages need of a lowering (``Lowered.handle``; live objects, never stored)."""

    lowered: Any  # jax.stages.Lowered: what compile compiles
    module: Any  # its StableHLO ir.Module: what census walks
    text: str  # the module's full text (``module_identity``): the stored module artifact


@dataclass(frozen=True, slots=True)
class Lowered(Record):
    """facts: module sha256 and size; ``handle`` is a ``LoweredModule``."""

    @property
    def module_sha256(self) -> str:
        """The module text's digest: what compile reuse, crossexec's identity and the module artifact key on."""
        return self.facts["module_sha256"]


def module_identity(module: Any) -> tuple[str, str]:
    """(sha256, text) of a module: the full printed text, no element elided.

    The one definition of "the same module" (compile reuse, crossexec's "identical to
    cpu" shortcut, the result cache): text printed with ``large_elements_limit`` shows
    a big constant as ``dense_resource<__elided__>``, so two modules that differ only in
    its values would share a hash. Debug locations are not printed (they are not part
    of what the module computes)."""
    text = module.operation.get_asm(enable_debug_info=False)
    return hashlib.sha256(text.encode()).hexdigest(), text


def run(traced: Traced, platform: str) -> Lowered:
    if not traced.ok:
        return Lowered("lower", platform, "skipped", error="trace did not succeed")
    timer = Timer()
    try:
        with timer():
            lowered = traced.handle.traced.lower(lowering_platforms=(platform,))
            module = lowered.compiler_ir("stablehlo")
        sha, text = module_identity(module)
        return Lowered("lower", platform, "ok", timer.seconds,
                       metrics={"module_bytes": float(len(text))},
                       facts={"module_sha256": sha}, handle=LoweredModule(lowered, module, text))
    except Exception as e:
        rec = failure(Lowered, "lower", platform, e, timer.seconds)
        # a host callback lowered for a platform whose backend this host lacks: cannot lower here
        return rec.with_status("not_runnable_here") if NO_BACKEND.search(str(e)) else rec
