"""The farm catalog: every family loads, inputs are identical across processes for the
same fingerprint, filters reject unknown names with suggestions, and a stale limitation
surfaces as ``unexpected_pass``."""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from jax import lax

from farm import catalog
from farm.errors import UnknownName
from farm.pipeline import run_harness
from farm.results import Options

ROOT = Path(__file__).resolve().parents[1]


def _sample() -> list[catalog.Harness]:
    """A few harnesses from every family (first, middle, last)."""
    out = []
    for fam in catalog.FARM_FAMILIES:
        hs = catalog.select(catalog.Filters(family=(fam,)))
        out += [hs[0], hs[len(hs) // 2], hs[-1]]
    return out


def _digest(args: list) -> str:
    h = hashlib.sha256()
    for a in args:
        arr = np.asarray(a)
        h.update(str(arr.dtype).encode() + repr(arr.shape).encode() + arr.tobytes())
    return h.hexdigest()


_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from farm import catalog
from tests.test_catalog_families import _digest
hs = catalog.by_fingerprint(catalog.load("farm"))
print(json.dumps({{fp: _digest(hs[fp].make_args()) for fp in json.loads(sys.argv[1])}}))
"""


def test_every_family_is_defined() -> None:
    hs = catalog.load("farm")
    assert {h.family for h in hs} == set(catalog.FARM_FAMILIES)
    assert len({h.group for h in hs}) >= 130
    assert {h.dtype for h in hs} == set(catalog.DTYPES)


def test_names_and_fingerprints_are_unique() -> None:
    hs = catalog.load("farm")
    assert len({h.fingerprint for h in hs}) == len(hs)
    assert len({h.name for h in hs}) == len(hs)


def test_inputs_identical_across_processes() -> None:
    sample = _sample()
    here = {h.fingerprint: _digest(h.make_args()) for h in sample}
    out = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT)), json.dumps(list(here))],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    there = json.loads(out.stdout.strip().splitlines()[-1])
    assert there == here


def test_make_args_is_repeatable_in_process() -> None:
    for h in _sample():
        assert _digest(h.make_args()) == _digest(h.make_args()), h.name


@pytest.mark.parametrize("field,value,near", [
    ("primitive", "cumsun", "cumsum"),
    ("family", "linalgg", "linalg"),
    ("group", "scater_add", "scatter_add"),
    ("dtype", "float23", "float32"),
])
def test_unknown_filter_values_suggest_nearest(field: str, value: str, near: str) -> None:
    with pytest.raises(UnknownName) as err:
        catalog.select(catalog.Filters(**{field: (value,)}))
    assert near in err.value.nearest
    assert f"did you mean" in str(err.value)


def test_stale_limitation_is_unexpected_pass() -> None:
    stale = catalog.Limitation("sin used to fail to lower on cpu", platforms=("cpu",), stage="lower")
    h = catalog.define("test_only", "sin", lax.sin, [catalog.RandArg((4,), "float32")], dtype="float32",
                       catalog="test_stale", reference=np.sin, limitations=[stale])
    out = run_harness(h, Options(platforms=("cpu",), repeats=1, crossexec=False))
    lowered = [r for r in out.records if r.stage == "lower" and r.platform == "cpu"]
    assert [r.status for r in lowered] == ["unexpected_pass"]
    assert "limitation no longer holds" in lowered[0].error
    assert out.worst == "unexpected_pass"


def test_declared_limitation_is_expected_fail() -> None:
    h = catalog.select(catalog.Filters(family=("linalg",), primitive=("eig",), dtype=("float32",)))[0]
    out = run_harness(h, Options(platforms=("tpu",), run_on=(), repeats=1, crossexec=False))
    assert [r.status for r in out.records if r.stage == "lower"] == ["expected_fail"]


def test_a_static_dtype_argument_counts_for_x64() -> None:
    """A conversion to float64 must run with x64 on, or JAX silently makes it float32."""
    to64 = catalog.define("test_only", "convert_element_type", lambda x, to: lax.convert_element_type(x, to),
                          [catalog.RandArg((3,), "float32"), catalog.DtypeArg("float64")], dtype="float32",
                          catalog="test_dtype_arg")
    plain = catalog.define("test_only", "convert_element_type", lambda x, to: lax.convert_element_type(x, to),
                           [catalog.RandArg((3,), "float32"), catalog.StaticArg("float64")], dtype="float32",
                           catalog="test_dtype_arg", params={"static": "plain"})
    assert to64.needs_x64 and not plain.needs_x64
    assert to64.static_argnums() == (1,) and to64.make_args()[1] == "float64"
    assert to64.args[1].describe() == plain.args[1].describe()  # same fingerprint input as before
    out = run_harness(to64, Options(platforms=("cpu",), repeats=1, crossexec=False))
    assert [r.facts["outputs"] for r in out.records if r.stage == "trace"] == [[{"shape": [3], "dtype": "float64"}]]
    with pytest.raises(UnknownName):
        catalog.DtypeArg("float65")


def test_conversion_family_uses_the_catalog_dtype_arg() -> None:
    hs = catalog.select(catalog.Filters(family=("conversion",), primitive=("convert_element_type",),
                                        dtype=("float32",), name=("to=float64",)))
    assert [type(a) for a in hs[0].args] == [catalog.RandArg, catalog.DtypeArg] and hs[0].needs_x64


def test_export_and_serialize_are_limitation_stages() -> None:
    assert {"export", "serialize"} <= set(catalog.LIMITATION_STAGES)
    with pytest.raises(ValueError):
        catalog.Limitation("no such stage", stage="crossexec_run")
    eig = catalog.select(catalog.Filters(family=("linalg",), primitive=("eig",), dtype=("float32",)))[0]
    assert eig.limitation("cuda", "export") and eig.limitation("cpu", "export") is None
