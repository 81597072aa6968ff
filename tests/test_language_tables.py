"""The language checks' own machinery: ULP counting and exact rounding, the [math_ulp]
profile table, the behaviour and ULP tables of reports, and which suites take the
language primitives."""
import json
from fractions import Fraction

import pytest
import torch

from triton_cts.ops.catalog import ALL_OPS
from triton_cts.ops.language import math as lm
from triton_cts.ops.language import random as lrand
from triton_cts.profiles import ProfileError, load_profiles
from triton_cts.results import behaviour

from tests.helpers import needs_interpreter, run_pytest

PROFILES = load_profiles()
WORDS, HIGH_WORDS = [1713891541, 4175744164], [501852170]


def test_ulp_distance_counts_representable_values():
    out = torch.tensor([1.0, -0.0, float("nan"), 1.0, float("inf"), -1e-45])
    want = torch.tensor([1.0000002, 0.0, float("nan"), float("nan"), 3.4028235e38, 1e-45])
    assert lm.ulp_distance(out, want).tolist() == [2.0, 0.0, 0.0, float("inf"), 1.0, 2.0]
    big = torch.tensor([1.305502988903131], dtype=torch.float64)
    assert lm.ulp_distance(big, torch.nextafter(big, torch.tensor([2.0], dtype=torch.float64))
                           ).item() == 1.0  # exact for float64 (no rounding of ordinals)


def test_round_exact_avoids_double_rounding():
    # 1 + 2^-11 is halfway between float16's 1 and 1 + 2^-10: the exact value decides
    halfway = Fraction(1) + Fraction(1, 2**11)
    got = lm.round_exact([halfway + Fraction(1, 2**80), halfway - Fraction(1, 2**80), halfway,
                          Fraction(70000), Fraction(-(10**400))], torch.float16)
    assert got.tolist() == [1.0009765625, 1.0, 1.0, float("inf"), float("-inf")]


def test_float64_rounds_once_to_bfloat16_and_float16():
    """torch converts float64 to bfloat16 and float16 through float32, rounding twice; the
    reference must not: seed 22 on an H100 counted a correct bfloat16 fma 1 ULP off."""
    a = torch.tensor([-40831.99897003174, 1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-40,
                      float("inf"), float("nan"), -0.0, 65519.99], dtype=torch.float64)
    bf16 = lm.to_nearest(a, torch.bfloat16).double()
    assert bf16[:2].tolist() == [-40704.0, 1.0078125]          # torch: -40960, 1.0
    assert a[:2].to(torch.bfloat16).double().tolist() == [-40960.0, 1.0]
    f16 = lm.to_nearest(a, torch.float16).double()
    assert f16[2].item() == 1 + 2**-10                           # torch: 1.0
    assert f16[3] == float("inf") and f16[4].isnan() and str(f16[5].item()) == "-0.0"
    assert f16[6] == 65504.0
    x, y, z = (torch.tensor([v], dtype=torch.bfloat16) for v in (88.0, -464.0, 0.00102996826))
    assert lm.correctly_rounded("fma", torch.bfloat16, x, y, z).item() == -40704.0


def test_correctly_rounded_handles_specials_and_exact_fma():
    x = torch.tensor([0.0, -0.0, float("inf"), float("nan"), -1.0, 4.0])
    assert lm.correctly_rounded("sqrt", torch.float32, x)[[0, 1, 2, 5]].tolist() == \
        [0.0, -0.0, float("inf"), 2.0]
    assert torch.isnan(lm.correctly_rounded("sqrt", torch.float32, x)[[3, 4]]).all()
    big = torch.tensor([1.5e308], dtype=torch.float64)  # x * m overflows float64, x*m+a not
    got = lm.correctly_rounded("fma", torch.float64, big, torch.tensor([2.0], dtype=torch.float64),
                               torch.tensor([-1.5e308], dtype=torch.float64))
    assert got.item() == 1.5e308


def test_every_bundled_profile_bounds_its_math_functions():
    for name, profile in PROFILES.items():
        table = profile.data.get("math_ulp")
        assert table, f"{name} has no [math_ulp] table"
        for fn in ("exp", "log", "sqrt", "sin", "fdiv", "fma"):
            assert lm.bound(profile, fn, torch.float32) is not None, (name, fn)


def test_a_profile_without_math_ulp_gets_the_opencl_bounds():
    data = dict(PROFILES["nvidia-sm90"].data)
    data.pop("math_ulp")
    from triton_cts.profiles.profile import profile_from_dict
    bare = profile_from_dict(data)
    b = lm.bound(bare, "exp", torch.float32)
    assert (b.ulp, b.source) == (3, lm.OPENCL_SOURCE)


@pytest.mark.parametrize("table, field", [
    ({"expo": {"float32": 1}}, "math_ulp.expo"),
    ({"exp": {"int32": 1}}, "math_ulp.exp.int32"),
    ({"exp": {"float32": -1}}, "math_ulp.exp.float32"),
    ({"exp": {"float32": {"ulp": 2}}}, "math_ulp.exp.float32"),
    ({"exp": {"float32": 1e9}}, "math_ulp.exp.float32"),
])
def test_bad_math_ulp_tables_are_refused(table, field):
    with pytest.raises(ProfileError) as err:
        PROFILES["nvidia-sm90"].derive(**{"math_ulp": table})
    assert field in str(err.value)


def test_the_reference_philox_keeps_its_words():
    # tl.randint as triton 3.9's interpreter computes it (the suite compares every mode)
    words = lrand.reference("randint", 0, torch.tensor([0, 1], dtype=torch.int32))
    high = lrand.reference("randint", 2**40 + 7, torch.tensor([2**33 + 5], dtype=torch.int64))
    assert (words.tolist(), high.tolist()) == (WORDS, HIGH_WORDS)


def test_behaviour_and_ulp_tables_gather_records_and_diff_without_failing():
    def props(**kw):
        rows = []
        behaviour.record(lambda k, v: rows.append((k, v)), "x of nan", kw["nan"])
        behaviour.record_ulp(lambda k, v: rows.append((k, v)), "exp", "float32", kw["ulp"], 2)
        return dict(rows)
    old = {"records": [{"profile": "a", "mode": "device", "properties": props(nan=0, ulp=1)}]}
    new = {"records": [{"profile": "a", "mode": "device", "properties": props(nan=-1, ulp=1.0)}]}
    tables = behaviour.tables(old["records"])
    assert tables["behaviour"] == [{"name": "x of nan", "profile": "a", "mode": "device",
                                    "values": [0], "checks": 1}]
    assert tables["ulp"][0]["max_ulp"] == 1.0 and tables["ulp"][0]["bound"] == 2.0
    changes = behaviour.diff(old, new)
    assert [(c["name"], c["old"], c["new"]) for c in changes] == [("x of nan", [0], [-1])]
    other = {"records": [{"profile": "b", "mode": "device", "properties": props(nan=0, ulp=1)}]}
    assert behaviour.diff(old, other) == []  # two targets: compared per mode
    with pytest.raises(ValueError):
        behaviour.record(lambda k, v: None, " ", 1)


def test_generic_suites_never_take_primitives():
    primitives = [op for op in ALL_OPS if op.primitive is not None]
    assert primitives and all(op.suites == ("test_compile", "test_language_math")
                              for op in primitives if op.name.startswith("tl_exp"))
    result = run_pytest("suites/test_numerics.py", "suites/test_relations.py",
                        "suites/test_compile.py", "--op", "tl_exp", "--vendor", "nvidia-sm90",
                        "--collect-only", "-q")
    ids = [line for line in result.stdout.splitlines() if "::" in line]
    assert ids and all(line.startswith("suites/test_compile.py") for line in ids), ids


@needs_interpreter
def test_report_carries_the_tables(tmp_path):
    out = tmp_path / "run.json"
    result = run_pytest("suites/test_language_math.py::test_float_to_int_truncates",
                        "--vendor", "nvidia-sm80", "--mode", "interpreter", "--op",
                        "tl_cast_float_to_int", "--hypothesis-profile", "ci", "-k", "int8",
                        "--report-json", str(out), "--report-html", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stdout[-3000:]
    doc = json.loads(out.read_text())
    names = {row["name"] for row in doc["behaviour"]}
    assert "float32->int8 undefined inputs" in names and "ulp" in doc
    assert "Behaviour where Triton leaves the result undefined" in (tmp_path / "r.html").read_text()
