"""What an export-feature harness exercises and what JAX must do with it: ``ExportFeature``.

``jax.export`` carries more than a function's values: which arguments are donated, the
PRNG implementation of a typed key, which safety checks were turned off, how many
devices the module was made for. Each has broken for users (jax#21314, #33471, #35796:
issue 43), and none shows in a harness's outputs. So the harness names the feature, and
the ``export_feature`` stage (``farm.pipeline.features``) records what each exported and
deserialized artifact did with it for the judge (``farm.judge.features``) to check.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The features, and what the stage checks for each:
#: - ``donation``: ``jax.jit(..., donate_argnums)`` exported: the module marks the aliasing
#:   (``tf.aliasing_output``), the mark survives the serialize round trip, a call with the
#:   argument donated gives the native values and consumes the donated buffer;
#: - ``prng_key``: a typed key array argument (``jax.random.key(impl=...)``): its aval says
#:   the implementation after the round trip, the same key gives the native bits, a key of
#:   another implementation is refused;
#: - ``safety_check``: a custom call with no compatibility guarantee is refused at export,
#:   exported with ``DisabledSafetyCheck.custom_call(target)``, and the disabled check is in
#:   the deserialized artifact;
#: - ``device_count``: exported for ``exported_for`` devices, called on ``called_on``: allowed
#:   (device polymorphism of a one-device module without shardings) or refused (JAX's
#:   error, ``refusals["call"]``).
KINDS = ("donation", "prng_key", "safety_check", "device_count")


@dataclass(frozen=True, slots=True)
class ExportFeature:
    """One feature a harness exercises (``kind``, one of ``KINDS``).

    ``fun``: the function exported, over the harness's arguments (a ``prng_key`` harness's
    takes the key first). ``donate``: the donated argument indices. ``impl``/``other_impl``:
    the key's PRNG implementation and one a call must refuse. ``target``: the custom call
    with no compatibility guarantee. ``exported_for``/``called_on``: device counts.
    ``refusals``: step -> the regular expression of the error JAX must raise there (a
    refusal that stops being raised is a finding; so is one raised with another error)."""

    kind: str
    fun: Callable[..., Any] = field(repr=False)
    donate: tuple[int, ...] = ()
    impl: str = "threefry2x32"
    other_impl: str = "rbg"
    target: str = ""
    exported_for: int = 1
    called_on: int = 1
    refusals: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"ExportFeature kind {self.kind!r}: one of {', '.join(KINDS)}")

    def describe(self) -> str:
        """The feature and its expectations as text (part of the harness's fingerprint)."""
        return repr((self.kind, self.donate, self.impl, self.other_impl, self.target, self.exported_for,
                     self.called_on, sorted(self.refusals.items())))
