"""The "planted" catalog: harnesses that misbehave on purpose (abort, hang, sleep).

Not part of the farm catalog; select with ``--catalog planted --modules harnesses.planted``
to prove that isolation, time limits and crash recovery work.
"""
import os
import time

import jax
import numpy as np
from jax import lax

from farm.catalog import RandArg, define

FAMILY = "planted"


def _with_callback(effect):
    def fun(x):
        y = lax.sin(x)
        return jax.pure_callback(lambda v: (effect(), v)[1], jax.ShapeDtypeStruct(y.shape, y.dtype), y)
    return fun


define(FAMILY, "sin", lax.sin, [RandArg((4,), "float32")], dtype="float32", group="planted_ok",
       catalog="planted", reference=np.sin)
define(FAMILY, "cos", lax.cos, [RandArg((4,), "float32")], dtype="float32", group="planted_ok",
       catalog="planted", reference=np.cos)
define(FAMILY, "abort", _with_callback(os.abort), [RandArg((4,), "float32")], dtype="float32",
       group="planted_abort", catalog="planted", reference=np.sin)
define(FAMILY, "hang", _with_callback(lambda: time.sleep(10**6)), [RandArg((4,), "float32")], dtype="float32",
       group="planted_hang", catalog="planted", reference=np.sin, timeout_s=8.0)
define(FAMILY, "exp", lax.exp, [RandArg((4,), "float32")], dtype="float32", group="planted_ok",
       catalog="planted", reference=np.exp)
