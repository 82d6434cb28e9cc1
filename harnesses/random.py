"""PRNG primitives: threefry2x32 against a NumPy implementation (checked on the
Random123 known-answer vector), random_seed / random_wrap / random_unwrap exactly, and
random_bits / normal / uniform through statistical invariants. A second JAX run is no
reference, so sampled values are judged by their distribution, never by equality."""
import jax
import numpy as np

from farm.catalog import FLOAT, CustomArg, chlo_leak, define, np_dtype

FAMILY = "random"
N = 4096


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), in NumPy uint32 arithmetic."""
    k0, k1, x0, x1 = (np.asarray(v, np.uint32) for v in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    with np.errstate(over="ignore"):
        x0, x1 = x0 + ks[0], x1 + ks[1]
        for i in range(5):
            for r in rotations[i % 2]:
                x0 = x0 + x1
                x1 = _rotl(x1, r) ^ x0
            x0 = x0 + ks[(i + 1) % 3]
            x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


#: Known answer (Random123 test vectors): key (0x13198a2e, 0x03707344), counter (0x243f6a88, 0x85a308d3).
assert tuple(int(v) for v in threefry2x32(0x13198A2E, 0x03707344, 0x243F6A88, 0x85A308D3)) == (0xC4923A9C, 0x483DF7A0)


def _threefry(k0, k1, x0, x1):
    from jax.extend.random import threefry2x32_p

    return threefry2x32_p.bind(k0, k1, x0, x1)


def _u32(shape, name="uint32_bits"):
    return CustomArg(name, lambda rng: rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32),
                     shape, "uint32")


def _seed(rng: np.random.Generator) -> np.ndarray:
    return np.uint32(rng.integers(0, 2**31))


def _bit_balance(seed, bits) -> float:
    """Each bit position is 1 about half the time: worst deviation in units of 5 sigma."""
    b = np.asarray(bits).astype(np.uint64).ravel()
    width = np.asarray(bits).dtype.itemsize * 8
    freq = np.array([((b >> np.uint64(i)) & np.uint64(1)).mean() for i in range(width)])
    return float(np.abs(freq - 0.5).max() / (5 * 0.5 / np.sqrt(b.size)))


def _moments(mean: float, var: float):
    def check(seed, sample) -> float:
        """Sample mean and variance within 5 standard errors (scaled so 1.0 is the bound)."""
        x = np.asarray(sample, np.float64).ravel()
        n = x.size
        z_mean = abs(x.mean() - mean) / np.sqrt(var / n)
        z_var = abs(x.var() - var) / (var * np.sqrt(2.0 / n) * 1.5)
        return float(max(z_mean, z_var) / 5)
    return check


STAT_TOL = (0.1, 0.1)  # the pipeline accepts invariant errors <= 10 * tol = 1.0

define(FAMILY, "threefry2x32", _threefry, [_u32(()), _u32(()), _u32((64,)), _u32((64,))], dtype="uint32",
       shapes=[(), (), (64,), (64,)], reference=threefry2x32, compare="exact")
define(FAMILY, "random_seed", lambda s: jax.random.key_data(jax.random.key(s)),
       [CustomArg("seed_u31", _seed, (), "uint32")], dtype="uint32",
       reference=lambda s: np.array([0, s], np.uint32), compare="exact")
define(FAMILY, "random_wrap", lambda k: jax.random.key_data(jax.random.wrap_key_data(k)), [_u32((3, 2))],
       dtype="uint32", reference=lambda k: k, compare="exact")
define(FAMILY, "random_unwrap", lambda k: jax.random.key_data(jax.random.split(jax.random.wrap_key_data(k), 3)),
       [_u32((2,))], dtype="uint32", compare="none", group="random_unwrap")
for dt in ("uint8", "uint16", "uint32", "uint64"):
    define(FAMILY, "random_bits",
           lambda s, dt=dt: jax.random.bits(jax.random.key(s), (N,), np_dtype(dt)),
           [CustomArg("seed_u31", _seed, (), "uint32")], dtype=dt, shapes=[(N,)], invariant=_bit_balance,
           compare="exact", tol=STAT_TOL)
for dt in FLOAT:
    define(FAMILY, "normal", lambda s, dt=dt: jax.random.normal(jax.random.key(s), (N,), np_dtype(dt)),
           [CustomArg("seed_u31", _seed, (), "uint32")], dtype=dt, shapes=[(N,)], group="random_normal",
           invariant=_moments(0.0, 1.0), tol=STAT_TOL, limitations=chlo_leak("erf_inv"))
    define(FAMILY, "uniform", lambda s, dt=dt: jax.random.uniform(jax.random.key(s), (N,), np_dtype(dt)),
           [CustomArg("seed_u31", _seed, (), "uint32")], dtype=dt, shapes=[(N,)], group="random_uniform",
           invariant=_moments(0.5, 1.0 / 12), tol=STAT_TOL)
