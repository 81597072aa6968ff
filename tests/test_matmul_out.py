"""matmul into a given output and added into it (``out=``, ``accumulate=``): what the
fused linear cross-entropy sums its chunks' weight gradients with."""
import pytest
import torch

from kernels import fast_launch
from kernels.matmul import matmul
from triton_cts.execution.autotune_probe import observe_autotuning
from triton_cts.execution.input_checks import ShapeMismatchError, UnsupportedDtypeError
from triton_cts.execution.launches import interpreted, record_launches
from triton_cts.profiles import load_profiles

PROFILES = load_profiles()
SM90, NPU = PROFILES["nvidia-sm90"], PROFILES["npu-ascend910b"]
TINY = {"GROUP_SIZE_M": 2, "num_warps": 1, "num_stages": 1}
#: two pointer configs and two descriptor configs, so that tuning times each twice
TWO_CONFIGS = SM90.derive(name="nvidia-sm90~two-configs-out", **{
    "autotune.matmul": [{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, **TINY},
                        {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, **TINY}],
    "autotune.matmul_tma": [{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, **TINY},
                            {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, **TINY}],
    "limits.compute_units": 3, "tuning.matmul.pointer_max_work": 1})


def _layouts(m, k, n, dtype):
    """(a, b) row-major, then A M-major and B K-major (the fused linear cross-entropy's
    weight-gradient and logits products)."""
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    return [(a, b), (a.t().contiguous().t(), b.t().contiguous().t())]


@pytest.mark.parametrize("profile", [TWO_CONFIGS, NPU], ids=lambda p: p.name)
# float16, not bfloat16: bf16 tl.dot returns wrong values in Triton's interpreter
@pytest.mark.parametrize("dtype,out_dtype", [(torch.float16, torch.float32),
                                             (torch.float16, torch.float16),
                                             (torch.float32, torch.float32)])
def test_matmul_writes_and_adds_into_out(profile, dtype, out_dtype):
    """``out=`` receives a @ b and is returned; ``accumulate=True`` adds a @ b to what out
    holds, in float32, through both kernels (16-bit products take descriptors here), on
    ragged sizes, with every config timed on the way (tuning must leave out as it was)."""
    if str(dtype).removeprefix("torch.") not in profile["dtypes.dot"]:
        pytest.skip(f"{profile.name} has no dot for {dtype}")
    torch.manual_seed(0)
    kernels = set()
    for m, k, n in ((40, 24, 64), (48, 40, 56)):  # ragged against every tile
        for a, b in _layouts(m, k, n, dtype):
            product = a.double() @ b.double()
            out = torch.full((m, n), float("nan"), dtype=out_dtype)
            with interpreted(), observe_autotuning(fresh=True, cpu_bench=True), \
                    record_launches() as log:
                same = matmul(a, b, profile=profile, input_precision="ieee", out=out)
                start = out.clone()
                matmul(a, b, profile=profile, input_precision="ieee", out=out, accumulate=True)
            kernels |= {launch.name for launch in log}
            assert same is out
            tol = 1e-5 if out_dtype == torch.float32 and dtype == torch.float32 else 2e-2
            torch.testing.assert_close(start.double(), product, rtol=tol, atol=tol)
            torch.testing.assert_close(out.double(), start.double() + product, rtol=tol, atol=tol)
    if profile is TWO_CONFIGS and dtype != torch.float32:
        assert kernels == {"_matmul_tma_kernel"}
    else:
        assert kernels == {"_matmul_kernel"}


def test_matmul_into_out_names_what_is_wrong_and_keeps_out_where_k_is_zero():
    a, b = torch.randn(8, 4), torch.randn(4, 6)
    bad = [({"accumulate": True}, ValueError, "pass out"),
           ({"out": torch.empty(8, 6, dtype=torch.int32)}, UnsupportedDtypeError, "out must be"),
           ({"out": torch.empty(8, 5)}, ShapeMismatchError, r"M x N = \(8, 6\)"),
           ({"out": torch.empty(6, 8).t()}, ValueError, "contiguous")]
    shared = torch.empty(100)
    bad.append(({"out": shared[:48].view(8, 6)}, ValueError, "shares memory with a"))
    for kwargs, error, match in bad:
        with interpreted(), pytest.raises(error, match=match):
            matmul(shared[40:72].view(8, 4) if "shares" in match else a, b, profile=SM90,
                   **kwargs)
    # K = 0: the product is zero; added, out keeps its values
    out = torch.ones(8, 6)
    with interpreted():
        assert matmul(a[:, :0], b[:0], profile=SM90, out=out, accumulate=True) is out
        assert torch.equal(out, torch.ones(8, 6))
        assert torch.equal(matmul(a[:, :0], b[:0], profile=SM90, out=out), torch.zeros(8, 6))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: timed tuning")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_matmul_adds_into_out_through_timed_tuning_on_a_gpu(dtype):
    """On a GPU every config is timed many times before the pick runs: out must come out
    as the one addition it asked for, at sizes past the pointer kernel's bound, in both
    layouts of the fused linear cross-entropy's products, with the profile's own configs."""
    profile = PROFILES["nvidia-sm90-h200"] if torch.cuda.get_device_capability() >= (9, 0) \
        else PROFILES["nvidia-sm80"]
    gen = torch.Generator(device="cuda").manual_seed(3)
    for m, k, n in ((1000, 520, 1200), (2048, 768, 1536)):
        a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
        b = torch.randn(k, n, device="cuda", generator=gen).to(dtype)
        for a_, b_ in ((a, b), (a.t().contiguous().t(), b.t().contiguous().t())):
            product = a_.double() @ b_.double()
            start = torch.randn(m, n, device="cuda", generator=gen)
            out = start.clone()
            fast_launch.clear()  # the picks of another dtype's test would launch directly
            with observe_autotuning(fresh=True) as calls:
                matmul(a_, b_, profile=profile, input_precision="ieee", out=out,
                       accumulate=True)
            # tuned here (float32's IEEE configs may prune to one: nothing then is timed)
            assert calls and (any(len(c.benchmarked) > 1 for c in calls)
                              or dtype == torch.float32)
            tol = 1e-4 * k if dtype == torch.float32 else 2e-3 * k ** 0.5
            torch.testing.assert_close(out.double(), start.double() + product, rtol=0,
                                       atol=tol)


def test_an_added_into_product_drops_configs_whose_float32_c_tiles_do_not_fit():
    """The epilogue of a product added into C holds float32 C tiles on chip: on amd-gfx942
    (64 KiB of LDS) the 128 x 256 and 256 x 256 tiles no longer fit, on the NPU (a unified
    buffer that holds about four) neither does 128 x 128; a product written, not added,
    keeps every config."""
    from triton_cts.execution import launches
    from triton_cts.toolchains.cross_compile import every_autotune_config

    def tiles(profile, accumulate):
        a, b = torch.ones(300, 200, dtype=torch.float16), torch.ones(200, 500, dtype=torch.float16)
        with every_autotune_config(), launches.capture_launches() as log:
            matmul(a, b, profile=profile, out=torch.zeros(300, 500), accumulate=accumulate)
        return {(launch.kwargs["BLOCK_SIZE_M"], launch.kwargs["BLOCK_SIZE_N"]) for launch in log}
    gfx942 = PROFILES["amd-gfx942"]
    assert tiles(gfx942, False) == {(128, 256), (256, 256), (128, 128), (64, 128), (64, 64)}
    assert tiles(gfx942, True) == {(128, 128), (64, 128), (64, 64)}
    assert tiles(NPU, False) == {(128, 128), (64, 128)}
    assert tiles(NPU, True) == {(64, 128)}
