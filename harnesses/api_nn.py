"""``jax.nn`` against float64 NumPy formulas (``scipy.special`` where it has the function:
``sigmoid`` is ``expit``, ``softmax`` is ``softmax``), each written from the function's
docstring definition (docs.jax.dev, jax.nn)."""
import numpy as np
import scipy.special as sp

from farm.catalog.api import MAIN, declare, spec, without

LABEL = "nn"
HALF = ("float32", "bfloat16")


def _gelu(x, approximate=True):
    if approximate:
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + sp.erf(x / np.sqrt(2)))


def _selu(x):
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return scale * np.where(x > 0, x, alpha * np.expm1(x))


def _standardize(x, axis=-1, epsilon=1e-5):
    m = np.mean(x, axis, keepdims=True)
    v = np.mean(np.square(x), axis, keepdims=True) - np.square(m)
    return (x - m) / np.sqrt(v + epsilon)


def _sparse_plus(x):
    return np.where(x <= -1, 0.0, np.where(x >= 1, x, (x + 1) ** 2 / 4))


def _one_hot(x, num_classes, axis=-1):
    out = (np.asarray(x)[..., None] == np.arange(num_classes)).astype(np.float64)
    return np.moveaxis(out, -1, axis)


def _attention(q, k, v, is_causal=False):
    s = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    if is_causal:
        t, u = s.shape[-2:]
        s = np.where(np.tril(np.ones((t, u), bool)), s, -np.inf)
    return np.einsum("bnts,bsnh->btnh", sp.softmax(s, axis=-1), v)


REFS = {
    "relu": lambda x: np.maximum(x, 0), "relu6": lambda x: np.clip(x, 0, 6), "sigmoid": sp.expit,
    "log_sigmoid": sp.log_expit, "softplus": lambda x: np.logaddexp(x, 0), "silu": lambda x: x * sp.expit(x),
    "swish": lambda x: x * sp.expit(x), "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "celu": lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x)), "selu": _selu, "gelu": _gelu,
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6, "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6, "hard_tanh": lambda x: np.clip(x, -1, 1),
    "identity": lambda x: x, "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "log1mexp": lambda x: np.log(-np.expm1(-x)), "mish": lambda x: x * np.tanh(np.logaddexp(x, 0)),
    "soft_sign": lambda x: x / (np.abs(x) + 1), "sparse_plus": _sparse_plus,
    "sparse_sigmoid": lambda x: np.clip((x + 1) / 2, 0, 1),
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2, "tanh": np.tanh,
}
DOMAIN = {"log1mexp": "positive"}
EDGES = {"log1mexp": (0.0, -1.0)}

#: The census's chlo ops per function (JAX #15608), measured on jax 0.12.0.1 (farm.catalog.api.chlo_limitations).
CHLO = {
    'gelu:erf': 'cpu,cuda,rocm,tpu: erfc',
    'squareplus': 'cpu,cuda,rocm,tpu: square',
    'standardize': 'cpu,cuda,rocm,tpu: square',
}

#: The edge variants of the elementwise functions are judged against the float64 formulas above
#: (``edge_reference="twin"``); squareplus's overflow found there is ``farm.catalog.known.API_EDGE_VALUES``
#: data (docs/repros/squareplus_overflow.py).
SPECS = [spec(n, DOMAIN.get(n, "real"), dtypes=HALF, reference=r, edge_values=EDGES.get(n, ()), edge_reference="twin")
         for n, r in REFS.items()]
SPECS += [
    spec("gelu", tag="erf", variants=({"approximate": False},), reference=_gelu, cases=("main",)),
    # jax.nn's softmax and log_softmax take axis=-1 by default (their docstrings), scipy's axis=None;
    # scipy refuses an empty softmax or logsumexp
    spec("softmax", kind="reduction", variants=({}, {"axis": 0}, {"axis": (0, 1)}), dtypes=HALF, empty=False,
         reference=lambda x, axis=-1: sp.softmax(x, axis=axis)),
    spec("log_softmax", kind="reduction", variants=({}, {"axis": 0}), dtypes=HALF, empty=False,
         reference=lambda x, axis=-1: sp.log_softmax(x, axis=axis)),
    spec("logsumexp", kind="reduction", variants=({}, {"axis": -1}, {"axis": 0, "keepdims": True}), dtypes=HALF,
         empty=False, reference=sp.logsumexp),
    spec("logmeanexp", kind="reduction", variants=({}, {"axis": -1}), empty=False,
         reference=lambda x, axis=None, keepdims=False: sp.logsumexp(x, axis=axis, keepdims=keepdims)
         - np.log(np.size(x) if axis is None else np.shape(x)[axis])),
    spec("standardize", kind="reduction", variants=({}, {"axis": 0}), empty=False, reference=_standardize),
    spec("glu", kind="custom", shapes=(((7, 4),),), variants=({}, {"axis": 0}) and ({},),
         reference=lambda x: x[..., :2] * sp.expit(x[..., 2:]), edge=False),
    spec("one_hot", "index", kind="custom", shapes=(((5,),), ((2, 3),)), call=lambda f, x: f(x, 4),
         reference=_one_hot, edge=False),
    spec("dot_product_attention", "real", "real", "real", kind="custom", shapes=(((2, 5, 2, 4),) * 3,),
         variants=({}, {"is_causal": True}), reference=_attention, edge=False),
]

declare(LABEL, SPECS, chlo=CHLO, chlo_on={"~=0.10.2": CHLO})  # measured the same on 0.10.2

without(LABEL, {
    "scaled_matmul": "block-scaled (microscaling) matmul: needs cuDNN's scale layout, no NumPy twin; not yet specified",
    "scaled_dot_general": "block-scaled (microscaling) dot: no NumPy twin; not yet specified",
    "get_scaled_dot_general_config": "not a computation: returns a configuration object",
})
