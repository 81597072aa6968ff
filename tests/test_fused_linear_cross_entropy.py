"""The fused linear + cross-entropy launcher (kernels/fused_linear_cross_entropy.py) in
interpreter mode against the unfused float64 reference: chunking happens and does not
change the answer, "mean" divides by the rows not ignored in the whole batch, bad inputs
raise the named errors; and Liger-Kernel's version through its adapter (stand-in
library)."""
import importlib

import pytest
import torch

from suites import assertions as ah
from suites import runner
from triton_cts.execution import launches
from triton_cts.execution.input_checks import ShapeMismatchError, UnsupportedDtypeError
from triton_cts.execution.modes import Mode
from triton_cts.ops.fused_linear_cross_entropy import FUSED_LINEAR_CROSS_ENTROPY as OP
from triton_cts.ops.implementation import Implementation
from triton_cts.profiles import load_profiles
from triton_cts.targets import CheckTarget
from tests.test_adapters import fake_libs  # noqa: F401 - the stand-in libraries' fixture

import kernels.fused_linear_cross_entropy as kf

PROFILE = load_profiles()["nvidia-sm90"]
#: 1 MiB of device memory (the schema's least): a chunk's logits get 64 KiB at most.
SMALL_MEMORY = PROFILE.derive(name="nvidia-sm90~small-memory",
                              **{"limits.device_memory_bytes": 1 << 20})
#: one small matmul tile (fewer autotune configs to interpret), 4 units of 256-byte
#: blocks and no stated peak (no compute-bound floor): chunks as small as 1 KiB (the real
#: profile's floor is 8.6 MB)
ONE_TILE = PROFILE.derive(name="nvidia-sm90~one-tile", **{"autotune.matmul": [
    {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 2,
     "num_warps": 2, "num_stages": 1}], "launch.max_fused_size_bytes": 256,
    "limits.compute_units": 4, "peak.dense_tflops": {}})


def _args(n_rows, hidden, n_classes, dtype, *, bias=True, seed=0, ignored=0.2):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_rows, hidden, generator=gen, dtype=torch.float64).to(dtype)
    w = (torch.randn(n_classes, hidden, generator=gen, dtype=torch.float64)
         / hidden ** 0.5).to(dtype)
    b = torch.randn(n_classes, generator=gen, dtype=torch.float64).to(dtype) if bias else None
    labels = torch.randint(0, n_classes, (n_rows,), generator=gen)
    labels[torch.rand(n_rows, generator=gen) < ignored] = -100
    if n_rows:
        labels[0] = 0
    return (x, w, labels, b)


def _target(profile):
    return CheckTarget(OP, Implementation("test", OP.name, "x:y"), profile, Mode.INTERPRETER)


def _run(args, kwargs, profile):
    with launches.interpreted(), launches.record_launches() as log:
        out = kf.fused_linear_cross_entropy(*runner.clone_args(args), **kwargs, profile=profile)
    return out, log


def _check(out, args, kwargs, profile, scale=1.0):
    target = _target(profile)
    case = type("Case", (), {"describe": lambda self: f"{args[0].dtype} {tuple(args[0].shape)}"})()
    return ah.assert_matches_reference(target, case, out, runner.run_reference(target, args, kwargs),
                                       repro="", scale=scale,
                                       ambiguities=runner.allowances(target, args, kwargs))


def _chunks(log) -> int:
    """Cross-entropy launches: one a chunk."""
    return sum(launch.name.startswith("_ce_") for launch in log)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype, bias", [(torch.float32, True), (torch.float16, False)])
def test_matches_the_unfused_reference_over_several_chunks(dtype, bias, reduction):
    args = _args(70, 24, 90, dtype, bias=bias)
    kwargs = dict(ignore_index=-100, label_smoothing=0.1, reduction=reduction)
    out, log = _run(args, kwargs, ONE_TILE)
    assert len(out) == (4 if bias else 3)
    assert out[0].dtype == torch.float32 and out[1].dtype == out[2].dtype == dtype
    # logits and their gradient of a chunk about as large as x: 70 * 24 / (2 * 90) rows
    assert kf.chunk_rows(ONE_TILE, 70, 90, 24, dtype) == 70 * 24 // (2 * 90)
    assert _chunks(log) == -(-70 // (70 * 24 // (2 * 90)))
    _check(out, args, kwargs, ONE_TILE)


def test_the_chunk_follows_the_profile():
    """About x's size; no less than the blocks every compute unit holds nor than the rows
    that amortize a chunk's fixed traffic; no more than a 16th of the device's memory; one
    chunk where chunks would hold as much memory with their float32 sum."""
    t, h, v = 65536, 4096, 128256  # x of 512 MiB in bfloat16, the Llama-3 head
    # the fixed traffic (2 x 2 + 8 bytes a weight element) at most an 8th of the products'
    # time (6 x rows flops an element): 8 x 989 TFLOP/s x 12 / (6 x 3350 GB/s) = 4724 rows
    # on an H100, up to a power of two, where x's size alone gives 1046
    assert kf.amortizing_rows(PROFILE, torch.bfloat16) == 8192
    assert kf.amortizing_rows(PROFILE, torch.float32) == 512  # 67 TFLOP/s of IEEE float32
    assert kf.amortizing_rows(ONE_TILE, torch.bfloat16) == 1  # no peak stated
    assert kf.chunk_rows(PROFILE, t, v, h, torch.bfloat16) == 8192
    h200 = load_profiles()["nvidia-sm90-h200"]  # 4.8 TB/s: 3297 rows, so 4096
    assert kf.amortizing_rows(h200, torch.bfloat16) == 4096
    assert kf.chunk_rows(h200, 2 * 8192, v, h, torch.bfloat16) == 4096
    # 8192 tokens: one chunk's logits and gradient (4 GiB) hold no more than two chunks'
    # (2 GiB) with the float32 sum of the weight gradient (2 GiB)
    assert kf.chunk_rows(h200, 8192, v, h, torch.bfloat16) == 8192
    assert kf.chunk_rows(h200, 8192, v, 2 * h, torch.bfloat16) == 8192
    assert kf.chunk_rows(h200, 8192, v, h // 2, torch.bfloat16) == 4096
    on_chip = PROFILE["launch.max_fused_size_bytes"] * PROFILE.compute_units
    assert kf.chunk_rows(PROFILE, 8192, 1000, 32, torch.float32) == on_chip // 8000
    assert kf.chunk_rows(SMALL_MEMORY, 8192, 1000, 32, torch.float32) == \
        (1 << 20) // kf.DEVICE_MEMORY_SHARE // 8000
    assert kf.chunk_rows(SMALL_MEMORY, 8192, 10**6, 32, torch.float32) == 1  # at least a row
    assert kf.chunk_rows(PROFILE, 40, 100, 64, torch.float32) == 40  # one chunk
    args = _args(200, 8, 100, torch.float32)
    kwargs = dict(ignore_index=-100, label_smoothing=0.0, reduction="mean")
    small = SMALL_MEMORY.derive(**{"autotune.matmul": ONE_TILE["autotune.matmul"]})
    out, log = _run(args, kwargs, small)
    assert _chunks(log) == 3  # 81 rows of 800 bytes of logits (and as much gradient)
    _check(out, args, kwargs, small)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_the_chunk_size_does_not_change_the_answer(reduction, monkeypatch):
    args = _args(45, 16, 40, torch.float32, seed=3)
    kwargs = dict(ignore_index=-100, label_smoothing=0.1, reduction=reduction)
    outs = {}
    for rows in (45, 7, 1):
        monkeypatch.setattr(kf, "chunk_rows", lambda *a, rows=rows: rows)
        outs[rows], log = _run(args, kwargs, ONE_TILE)
        assert _chunks(log) == -(-45 // rows)
        _check(outs[rows], args, kwargs, ONE_TILE)
    for rows in (7, 1):  # the chunks' sums in another order: float32 rounding apart
        for got, want in zip(outs[rows], outs[45]):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_mean_divides_by_the_rows_not_ignored_in_the_whole_batch(monkeypatch):
    """Chunks of 4 rows: the first has 4 rows to average, the second 1, the third none. A
    mean per chunk (or a count per chunk) gives another loss and other gradients."""
    monkeypatch.setattr(kf, "chunk_rows", lambda *a: 4)
    x, w, labels, b = _args(12, 8, 20, torch.float32, seed=5, ignored=0.0)
    labels[5:] = 7
    labels[4] = 3
    kwargs = dict(ignore_index=7, label_smoothing=0.0, reduction="mean")
    args = (x, w, labels, b)
    out, log = _run(args, kwargs, ONE_TILE)
    assert _chunks(log) == 3
    _check(out, args, kwargs, ONE_TILE)
    logits = x.double() @ w.double().t() + b.double()
    rows = torch.nn.functional.cross_entropy(logits, labels, ignore_index=7, reduction="none")
    assert abs(float(out[0]) - float(rows.sum() / 5)) < 1e-5


def test_every_row_ignored_gives_nan_as_torch(monkeypatch):
    args = _args(6, 8, 10, torch.float32, seed=2)
    args[2].fill_(-100)
    kwargs = dict(ignore_index=-100, label_smoothing=0.1, reduction="mean")
    out, _ = _run(args, kwargs, ONE_TILE)
    assert torch.isnan(out[0])
    # and gradients of 0, as torch's autograd gives them (not 0 * (1 / 0) = NaN)
    assert all(not g.any() for g in out[1:])
    _check(out, args, kwargs, ONE_TILE)
    out, _ = _run(args, dict(ignore_index=-100, label_smoothing=0.0, reduction="sum"), ONE_TILE)
    assert float(out[0]) == 0.0 and not out[2].any()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_no_tokens_give_what_torch_gives(reduction):
    args = _args(0, 8, 10, torch.float32)
    with launches.interpreted(), launches.record_launches() as log:
        out = kf.fused_linear_cross_entropy(*args, reduction=reduction, profile=PROFILE)
    assert not log  # nothing to launch
    loss, grad_x, grad_w, grad_b = out
    assert grad_x.shape == (0, 8) and not grad_w.any() and not grad_b.any()
    if reduction == "none":
        assert loss.shape == (0,)
    else:
        assert torch.isnan(loss) if reduction == "mean" else float(loss) == 0.0


def _bad(**change):
    x, w, labels, b = _args(6, 8, 10, torch.float32)
    args = dict(x=x, weight=w, labels=labels, bias=b) | change
    with launches.interpreted():
        kf.fused_linear_cross_entropy(**args, profile=PROFILE)


def test_bad_inputs_raise_errors_naming_the_problem():
    with pytest.raises(ShapeMismatchError, match=r"weight \[V, hidden\].*x=\(6, 8\), weight=\(10, 9\)"):
        _bad(weight=torch.randn(10, 9))
    with pytest.raises(ShapeMismatchError, match=r"one label per token, shape \(6,\), got \(5,\)"):
        _bad(labels=torch.zeros(5, dtype=torch.int64))
    with pytest.raises(ShapeMismatchError, match=r"bias must have one value per class"):
        _bad(bias=torch.randn(11))
    with pytest.raises(UnsupportedDtypeError, match="'x' has dtype torch.float64"):
        _bad(x=torch.randn(6, 8, dtype=torch.float64))
    with pytest.raises(UnsupportedDtypeError, match="must have one dtype"):
        _bad(weight=torch.randn(10, 8).half())
    with pytest.raises(UnsupportedDtypeError, match="labels must be an int32 or int64"):
        _bad(labels=torch.zeros(6))
    with pytest.raises(ValueError, match=r"no classes \(V = 0\)"):
        _bad(weight=torch.randn(0, 8), bias=None)
    with pytest.raises(ValueError, match="reduction must be one of"):
        _bad(reduction="avg")
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\]"):
        _bad(label_smoothing=1.5)


def test_the_error_model_fails_a_perturbed_gradient():
    """The bound is not so loose that a weight gradient off by 1% passes."""
    args = _args(30, 16, 40, torch.float16, seed=7)
    kwargs = dict(ignore_index=-100, label_smoothing=0.0, reduction="sum")
    out, _ = _run(args, kwargs, ONE_TILE)
    _check(out, args, kwargs, ONE_TILE)
    wrong = (out[0], out[1], out[2] * 1.01, out[3])
    with pytest.raises(AssertionError, match="output 2 has"):
        _check(wrong, args, kwargs, ONE_TILE)


def test_liger_adapter_asks_for_the_gradients_summed_in_float32(fake_libs, monkeypatch):
    """The adapter gets the gradients although its inputs do not require grad, summed in
    float32, and returns them in the op's order (grad_bias last, only with a bias)."""
    liger = importlib.import_module("triton_cts.adapters.liger")
    flce = importlib.import_module("liger_kernel.ops.fused_linear_cross_entropy")
    seen = {}
    real = flce.fused_linear_cross_entropy_forward

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)
    monkeypatch.setattr(flce, "fused_linear_cross_entropy_forward", spy)
    for bias in (True, False):
        args = _args(9, 8, 12, torch.float32, bias=bias)
        kwargs = dict(ignore_index=-100, label_smoothing=0.1, reduction="mean")
        out = liger.fused_linear_cross_entropy(*args, **kwargs)
        assert len(out) == (4 if bias else 3)
        _check(out, args, kwargs, PROFILE)
    assert seen["compute_gradients"] is True and seen["weight_requires_grad"] is True
    assert seen["accum_dtype"] == torch.float32
