"""The rest of ``jax.export`` (issue 43): donation, typed PRNG key arrays, a disabled
safety check, and device-count polymorphism, each with what JAX must do with it
(``ExportFeature``; ``farm.catalog.features`` lists the checks).

The ordinary stages run each harness's function as a plain jitted function (the
``safety_check`` harness's plain twin is the identity its custom call stands for); the
``export_feature`` stage exports the feature for all four platforms and for the cpu alone,
round-trips it and calls it here (docs/effects.md, "Export features"). JAX's designed
refusals (a key of another implementation, a custom call with no compatibility
guarantee, a module made for two devices called on eight) are ``refusals`` on the
feature, with JAX's error: a refusal that disappears is a finding.
"""
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from farm.catalog import CustomArg, ExportFeature, Limitation, define

FAMILY = "export_features"
GROUP = "export_features"
ALL = ("cpu", "cuda", "rocm", "tpu")
_X = np.arange(8 * 4, dtype=np.float32).reshape(8, 4) / 7.0
#: The custom call no one registers: exported only with its safety check disabled.
TARGET = "farm_unguaranteed_target"

#: The plain twin of the safety-check harness has no custom call; the feature stage's call
#: of the real one cannot run where no handler is registered (every host: nobody registers it).
#: jaxlib's wording of a call to a target with no handler: 0.5.3 says "No registered
#: implementation for FFI custom call to T for Host", later ones "No FFI handler registered for T".
NO_HANDLER = rf"(No FFI handler registered for|No registered implementation for FFI custom call to) {TARGET}\b"

#: jax 0.5.3's serialization has no dtype kind for extended (PRNG key) avals: it raises
#: KeyError on the key's dtype. 0.6.0 serializes them (jax/_src/export/serialization.py).
KEY_NOT_SERIALIZED = Limitation("jax before 0.6 cannot serialize an export taking a typed PRNG key (no dtype kind "
                                "for key<fry>)", stage="export_feature", error=r"^KeyError: key<fry>$", jax="<0.6")


def _x() -> list[CustomArg]:
    return [CustomArg("export_features_x:float32:8x4", lambda rng: _X.copy(), _X.shape, "float32")]


def donated(x: Any) -> Any:
    return x * 2 + 1


def keyed(key: Any, x: Any) -> Any:
    return x + jax.random.uniform(key, x.shape, x.dtype)


def unguaranteed(x: Any) -> Any:
    return jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def elementwise(x: Any) -> Any:
    return jnp.sin(x) * 2


def _define(primitive: str, fun: Any, reference: Any, feature: ExportFeature, variant: str,
            limitations: tuple[Limitation, ...] = (), devices: int = 1) -> None:
    define(FAMILY, primitive, fun, _x(), dtype="float32", group=GROUP, params={"variant": variant},
           reference=reference, feature=feature, limitations=limitations, devices=devices)


_define("donation", donated, lambda x: x * 2 + 1, ExportFeature("donation", donated, donate=(0,)), "donate0")
# the plain twin draws its key inside (the ordinary stages have no key argument); the
# feature passes a typed key of the harness's seed
_define("prng_key", lambda x: keyed(jax.random.key(0), x), None,
        ExportFeature("prng_key", keyed, impl="threefry2x32", other_impl="rbg",
                      refusals={"other_impl": r"Dtype mismatch for args\[0\]: expected key<fry> and called with key<rbg>"}),
        "threefry", limitations=(KEY_NOT_SERIALIZED,))
_define("custom_call", lambda x: x, lambda x: x,
        ExportFeature("safety_check", unguaranteed, target=TARGET,
                      refusals={"export": r"Cannot serialize code with custom calls whose targets have no "
                                          r"compatibility guarantees",
                                "call": NO_HANDLER}),
        "unguaranteed")
_define("device_count", elementwise, lambda x: np.sin(x) * 2,
        ExportFeature("device_count", elementwise, exported_for=1, called_on=8), "1_on_8", devices=8)
_define("device_count", elementwise, lambda x: np.sin(x) * 2,
        ExportFeature("device_count", elementwise, exported_for=2, called_on=8,
                      refusals={"call": r"was exported for 2 devices and is called in a context with 8 devices"}),
        "2_on_8", devices=8)
