"""The ``io`` artifact: a harness's inputs and outputs as one ``.npz``.

NumPy's npz keeps ml_dtypes arrays (bfloat16, float8_*) only as raw void bytes (``|V2``),
so the dtype names travel beside them and are restored on read: a CPU host's bfloat16
outputs must come back as bfloat16 on a device host.
"""
from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np


def pack(inputs: Sequence[Any], outputs: Sequence[Any]) -> bytes:
    arrays = {f"in{i}": np.asarray(a) for i, a in enumerate(inputs)}
    arrays.update({f"out{i}": np.asarray(o) for i, o in enumerate(outputs)})
    names = [f"{k}={a.dtype.name}" for k, a in arrays.items()]
    buf = io.BytesIO()
    np.savez(buf, __dtypes__=np.array(names, dtype=np.str_), **arrays)
    return buf.getvalue()


def _dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def unpack(data: bytes) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, outputs) with their dtypes restored (older blobs without names load as saved)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        names = dict(s.split("=", 1) for s in z["__dtypes__"].tolist()) if "__dtypes__" in z.files else {}
        arrays = {k: z[k] for k in z.files if k != "__dtypes__"}
    for k, name in names.items():
        a = arrays[k]
        if a.dtype.kind == "V" and a.dtype.name != name:
            arrays[k] = a.view(_dtype(name))
    ins = [arrays[f"in{i}"] for i in range(sum(1 for k in arrays if k.startswith("in")))]
    outs = [arrays[f"out{i}"] for i in range(sum(1 for k in arrays if k.startswith("out")))]
    return ins, outs
