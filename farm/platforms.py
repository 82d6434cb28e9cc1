"""Platform names: what we lower for, and what kinds of device can run things."""
from __future__ import annotations

#: Platforms every host can lower and export for.
from farm.results import LOWERING_PLATFORMS  # noqa: E402  (one definition, in the contract)

#: Device kinds a worker may natively compile and execute on.
DEVICE_KINDS: tuple[str, ...] = ("cpu", "gpu", "tpu")

#: Which lowering platform a device kind runs natively.
NATIVE_PLATFORM = {"cpu": "cpu", "gpu": "cuda", "tpu": "tpu"}

#: Ray custom resource advertised by a worker with that device kind.
SLOT_RESOURCE = {kind: f"{kind}_slot" for kind in DEVICE_KINDS}


def local_device_kinds() -> tuple[str, ...]:
    """Device kinds this process can run natively (imports jax)."""
    import jax

    kinds = set()
    for backend in ("cpu", "gpu", "tpu"):
        try:
            if jax.devices(backend):
                kinds.add(backend)
        except RuntimeError:
            pass
    return tuple(k for k in DEVICE_KINDS if k in kinds)


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
