"""The attention kernels on fixed cases the random draws reach only now and then (grouped
heads 4 -> 2, head dims 64, 96 and 128, causal offsets that leave queries seeing no
key, several key blocks, select loads), a planted head mapping they must catch, the
profile's attention tables, and the FlagGems adapter's masks on the stand-in library."""
import importlib

import pytest
import torch

from suites import assertions as ah
from suites import runner
from triton_cts.execution import launches
from triton_cts.execution.modes import Mode
from triton_cts.ops.attention import ATTENTION, ATTENTION_BACKWARD
from triton_cts.ops.implementation import Implementation
from triton_cts.profiles import ProfileError, load_profiles
from triton_cts.targets import CheckTarget
from tests.test_adapters import fake_libs  # noqa: F401 - the stand-in libraries' fixture

import kernels.attention as ka
from kernels.attention.plan import _config, _fwd_need

SM90 = load_profiles()["nvidia-sm90"]
#: 16 x 16 tiles: a few dozen keys span several blocks; select loads as on SIMD NPUs
SMALL = SM90.derive(**{"autotune.attention": [{"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 1,
                                               "num_stages": 1}],
                       "autotune.attention_backward": [
                           {"BLOCK_M1": 16, "BLOCK_N1": 32, "BLOCK_M2": 32, "BLOCK_N2": 16,
                            "num_warps": 1, "num_stages": 1}],
                       "launch.max_grid_num": 3})
SELECT = SMALL.derive(**{"io.load": "select"})

# (B, H, H_kv, Sq, Sk, D, causal, causal_offset)
CASES = [
    (1, 4, 2, 37, 53, 96, False, 0),
    (1, 4, 2, 40, 29, 64, True, 0),
    (2, 2, 1, 33, 20, 128, True, -9),    # queries 0..8 see no key
    (1, 3, 3, 19, 45, 33, True, 26),     # bottom-right alignment
]


def _args(case, dtype, seed=0):
    b, h, h_kv, sq, sk, d, causal, offset = case
    gen = torch.Generator().manual_seed(seed)
    q, k, v, do = (torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
                   for shape in ((b, h, sq, d), (b, h_kv, sk, d), (b, h_kv, sk, d),
                                 (b, h, sq, d)))
    kwargs = {"causal": causal, "causal_offset": offset} if causal else {}
    return (q, k, v), (q, k, v, do), kwargs


def _check(op, fn, args, kwargs, profile):
    target = CheckTarget(op, Implementation("test", op.name, "x:y"), profile, Mode.INTERPRETER)
    case = type("Case", (), {"describe": lambda self: f"{args[0].dtype} {tuple(args[0].shape)}"})()
    with launches.interpreted():
        out = fn(*runner.clone_args(args), **kwargs, profile=profile)
    ah.assert_matches_reference(target, case, out, runner.run_reference(target, args, kwargs),
                                repro="", error_scales=runner.error_scales(target, args, kwargs),
                                ambiguities=runner.allowances(target, args, kwargs))


@pytest.mark.parametrize("profile, dtype", [(SMALL, torch.float16), (SMALL, torch.float32),
                                            (SELECT, torch.float32)],
                         ids=["masked-float16", "masked-float32", "select-float32"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_forward_and_backward_match_torch(case, profile, dtype):
    fwd, bwd, kwargs = _args(case, dtype)
    _check(ATTENTION, ka.attention, fwd, kwargs, profile)
    _check(ATTENTION_BACKWARD, ka.attention_backward, bwd, kwargs, profile)


@pytest.mark.parametrize("case", CASES[:3])
def test_the_backward_launches_its_gradients_once_where_their_tiles_fit_one_wave(case):
    """dk/dv and dq tiles share one launch where the profile takes it and all of them fit
    one program per compute unit, and take two past that or without the field, with
    bitwise the same gradients (the profile caps the grid at 3 programs, so both walk
    their tiles in grid-stride loops)."""
    _, (q, k, v, do), kwargs = _args(case, torch.float32)
    got = {}
    for units, single, gradient_launches in ((1, True, 2), (1000, False, 2), (1000, True, 1)):
        profile = SMALL.derive(**{"limits.compute_units": units,
                                  "tuning.attention.backward_single_launch": single})
        with launches.interpreted(), launches.record_launches() as log:
            grads = ka.attention_backward(q, k, v, do, **kwargs, profile=profile)
        assert [launch.name for launch in log if launch.name.startswith("_attn_bwd")] == \
            ["_attn_bwd_delta"] + ["_attn_bwd_grads"] * gradient_launches
        got[units, single] = grads
    for one, two, three in zip(got[1000, True], got[1, True], got[1000, False]):
        assert torch.equal(one, two) and torch.equal(one, three)


def test_fully_masked_rows_are_zero_with_zero_gradients():
    fwd, bwd, kwargs = _args(CASES[2], torch.float32)
    with launches.interpreted():
        o = ka.attention(*fwd, **kwargs, profile=SMALL)
        dq, _, _ = ka.attention_backward(*bwd, **kwargs, profile=SMALL)
    assert torch.equal(o[:, :, :9], torch.zeros_like(o[:, :, :9]))
    assert torch.equal(dq[:, :, :9], torch.zeros_like(dq[:, :, :9]))
    assert o[:, :, 9:].abs().sum() > 0


@pytest.mark.parametrize("causal", [False, True])
def test_a_query_scoring_minus_inf_against_every_key_is_zero(causal):
    """Seed 21 on an H100: a -inf query (head dim 1) against positive keys has only -inf
    scores. The reference's convention is 0, masked or not (torch 2.13 on the CPU, and
    FlashAttention-style kernels; torch 2.11's CUDA math path gave NaN under a mask), and
    the kernel follows it; a NaN query still gives NaN."""
    from triton_cts.ops.attention import reference
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 5, 1, generator=gen, dtype=torch.float64)
    k = torch.rand(1, 1, 4, 1, generator=gen, dtype=torch.float64) + 0.5   # positive keys
    v = torch.randn(1, 1, 4, 1, generator=gen, dtype=torch.float64)
    q[0, 0, 3, 0], q[0, 1, 2, 0] = float("-inf"), float("nan")
    kwargs = {"causal": True, "causal_offset": 1} if causal else {}
    ref = reference(q, k, v, **kwargs)
    with launches.interpreted():
        out = ka.attention(q.float(), k.float(), v.float(), **kwargs, profile=SMALL)
    assert ref[0, 0, 3, 0] == 0 and out[0, 0, 3, 0] == 0
    assert ref[0, 1, 2].isnan().all() and out[0, 1, 2].isnan().all()
    finite = torch.ones_like(ref, dtype=torch.bool)
    finite[0, 0, 3], finite[0, 1, 2] = False, False
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, enable_gqa=True, is_causal=False,
        attn_mask=torch.ones(5, 4, dtype=torch.bool).tril(1) if causal else None)
    torch.testing.assert_close(ref[finite], sdpa[finite])
    torch.testing.assert_close(out.double()[finite], ref[finite], rtol=1e-5, atol=1e-6)


def _heads_by_remainder(q, k, v, *, profile, **kwargs):
    """Planted: query head h reads key/value head h % H_kv instead of h // (H / H_kv)."""
    group = q.shape[1] // k.shape[1]
    return ka.attention(q, k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1), **kwargs,
                        profile=profile)


def test_a_wrong_head_mapping_is_caught():
    fwd, _, kwargs = _args(CASES[0], torch.float32)
    with pytest.raises(AssertionError, match="out of tolerance"):
        _check(ATTENTION, _heads_by_remainder, fwd, kwargs, SMALL)


def test_configs_fit_shared_memory_and_tables_are_validated():
    sm120 = load_profiles()["nvidia-sm120"]
    pick = lambda dtype, d: _config(sm120, "attention", dtype, d, _fwd_need)  # noqa: E731
    assert _fwd_need(pick(torch.bfloat16, 128), 2, 128) <= 101376
    assert pick(torch.float32, 256)["BLOCK_M"] < pick(torch.bfloat16, 128)["BLOCK_M"]
    with pytest.raises(ProfileError, match=r"autotune.attention\[0\].BLOCK_N.*power of two"):
        SM90.derive(**{"autotune.attention": [{"BLOCK_M": 64, "BLOCK_N": 24}]})
    with pytest.raises(ProfileError, match="BLOCK_M2"):
        SM90.derive(**{"autotune.attention_backward": [{"BLOCK_M1": 16, "BLOCK_N1": 16,
                                                        "BLOCK_N2": 16}]})


def test_bad_inputs_are_refused_with_the_problem_named():
    q, k, v = torch.randn(1, 3, 4, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    with launches.interpreted(), pytest.raises(ValueError, match=r"key/value heads \(2\)"):
        ka.attention(q, k, v, profile=SM90)
    with launches.interpreted(), pytest.raises(ValueError, match="needs causal=True"):
        ka.attention(q, k[:, :1], v[:, :1], causal_offset=2, profile=SM90)
    with launches.interpreted(), pytest.raises(ValueError, match="head dim 300"):
        big = torch.randn(1, 1, 2, 300)
        ka.attention(big, big, big, profile=SM90)


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[3]], ids=["gqa", "offset", "br"])
def test_flag_gems_adapter_passes_masks_and_groups(case, fake_libs, monkeypatch):
    adapter = importlib.import_module("triton_cts.adapters.flag_gems")
    fwd, _, kwargs = _args(case, torch.float32)
    target = CheckTarget(ATTENTION, Implementation("flag_gems", "attention", "x:y"), SM90,
                         Mode.INTERPRETER)
    desc = type("Case", (), {"describe": lambda self: "float32"})()
    ref = runner.run_reference(target, fwd, kwargs)
    ah.assert_matches_reference(target, desc, adapter.attention(*fwd, **kwargs), ref, repro="")
    monkeypatch.setenv("FAKE_LIB_FAULT", "scaled_dot_product_attention")
    with pytest.raises(AssertionError, match="out of tolerance"):
        ah.assert_matches_reference(target, desc, adapter.attention(*fwd, **kwargs), ref,
                                    repro="")
