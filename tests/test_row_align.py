"""Rows whose length 16 does not divide still load 16-byte vectors (kernels/row_align.py),
and so do elementwise kernels over such sizes (grid_stride.vector_split): the
cross-compiled sm_90 code of the row kernels at 3000 columns and of GELU and the GLUs
over 11 x 2999 elements, and the values the launchers compute with the rebuilt lengths."""
import re

import pytest
import torch
import triton

from kernels import grid_stride
from kernels import row_align as ra
from kernels.gelu import gelu, gelu_backward
from kernels.glu import geglu_backward, swiglu
from kernels.layer_norm import forward as ln_forward
from kernels.layer_norm import plan as ln_plan
from kernels.layer_norm import layer_norm, layer_norm_backward
from kernels.reductions import max_dim, prod_dim
from kernels.softmax import softmax
from triton_cts.execution.modes import Mode, execute
from triton_cts.profiles import load_profiles
from triton_cts.toolchains.cross_compile import specialize, use_project_cache

use_project_cache()
SM90 = load_profiles()["nvidia-sm90"]


@pytest.mark.parametrize("n, vector, align", [
    (3000, 8, 8), (3000, 4, 4), (3000, 2, 2), (4104, 16, 8), (2999, 8, 1), (6, 8, 2),
    (12, 4, 4), (0, 8, 1), (1, 16, 1), (4096, 8, 1), (48, 4, 1), (3000, 16, 8)])
def test_row_align_is_the_power_of_two_triton_does_not_already_know(n, vector, align):
    assert ra.row_align(n, vector) == align


def _forward_and_backward(x, w):
    out = layer_norm(x, w, w, profile=SM90)
    layer_norm_backward(x, x, w, w, out.mean, out.rstd, profile=SM90)
    softmax(x, profile=SM90)


def _vector_loads(launches) -> dict[str, bool]:
    """kernel name -> whether its sm_90 PTX has a 16-byte global load."""
    found = {}
    for launch in launches:
        src, options = specialize(launch, SM90.gpu_target())
        ptx = triton.compile(src, target=SM90.gpu_target(), options=options).asm["ptx"]
        found[launch.name] = bool(re.search(r"ld\.global(\.\w+)*\.v4", ptx))
    return found


def test_rows_of_3000_bf16_elements_load_16_byte_vectors(monkeypatch):
    x, w = torch.randn(64, 3000).bfloat16(), torch.randn(3000).bfloat16()
    launches = execute(_forward_and_backward, Mode.COMPILE, SM90, (x, w), takes_profile=False)
    found = _vector_loads(launches)
    assert {"_layer_norm_fwd_fused_kernel", "_layer_norm_bwd_fused_kernel",
            "_softmax_fwd_fused_kernel"} <= found.keys()
    assert all(found.values()), found
    # without the hint the same forward loads one element at a time
    monkeypatch.setattr(ln_plan, "row_align", lambda n, vector: 1)
    ln_forward._forward_plan.cache_clear()
    try:
        launches = execute(lambda x, w: layer_norm(x, w, w, profile=SM90), Mode.COMPILE, SM90,
                           (x, w), takes_profile=False)
        assert _vector_loads(launches) == {"_layer_norm_fwd_fused_kernel": False}
    finally:
        ln_forward._forward_plan.cache_clear()


def test_row_reductions_at_4104_bf16_columns_load_16_byte_vectors():
    """max_dim and prod_dim over rows of 4104 bf16 elements (8 divides it, 16 does not)."""
    x = torch.randn(64, 4104).bfloat16()
    launches = execute(lambda x: (max_dim(x, profile=SM90), prod_dim(x, profile=SM90)),
                       Mode.COMPILE, SM90, (x,), takes_profile=False)
    found = _vector_loads(launches)
    assert found == {"_max_dim_rows_kernel": True, "_prod_dim_rows_kernel": True}


@pytest.mark.parametrize("n", [6, 12, 3000, 2999])
def test_rebuilt_row_lengths_give_the_same_values(n):
    x, w = torch.randn(5, n), torch.randn(n)
    y = execute(lambda x, w: layer_norm(x, w, None, profile=SM90).y, Mode.INTERPRETER, SM90,
                (x, w), takes_profile=False)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (n,), w), rtol=1e-5,
                               atol=1e-5)
    p = execute(lambda x: softmax(x, profile=SM90), Mode.INTERPRETER, SM90, (x,),
                takes_profile=False)
    torch.testing.assert_close(p, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n, vector, split", [
    (4096, 8, (1, False)), (2999, 8, (8, True)), (3000, 8, (8, False)), (3000, 16, (16, True)),
    (5, 4, (4, True)), (4, 4, (4, False)), (0, 8, (1, False))])
def test_vector_split_leaves_a_tail_only_where_whole_vectors_do_not_cover_n(n, vector, split):
    assert grid_stride.vector_split(n, vector) == split


def _elementwise(x):
    gelu(x, profile=SM90)
    gelu_backward(x, x, profile=SM90)
    swiglu(x, x, profile=SM90)
    geglu_backward(x, x, x, profile=SM90)


def test_elementwise_kernels_over_an_odd_size_load_16_byte_vectors(monkeypatch):
    x = torch.randn(11, 2999).bfloat16()
    launches = execute(_elementwise, Mode.COMPILE, SM90, (x,), takes_profile=False)
    found = _vector_loads(launches)
    assert {"_gelu_tanh_fwd_kernel", "_gelu_tanh_bwd_kernel", "_glu_fwd_kernel",
            "_glu_bwd_kernel"} <= found.keys()
    assert all(found.values()), found
    # without the split the same kernels load one element at a time
    monkeypatch.setattr(grid_stride, "vector_split", lambda n, vector: (1, False))
    grid_stride.elementwise_plan.cache_clear()
    try:
        launches = execute(_elementwise, Mode.COMPILE, SM90, (x,), takes_profile=False)
        assert not any(_vector_loads(launches).values())
    finally:
        grid_stride.elementwise_plan.cache_clear()


@pytest.mark.parametrize("vector_bytes", [4, 16, 32])
@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 29, 2999, 4101])
def test_elementwise_tails_give_the_same_values(n, vector_bytes):
    # small blocks and grids, so the tail follows a grid-stride walk over several blocks
    profile = SM90.derive(**{"io.vector_load_bytes": vector_bytes,
                             "launch.elementwise_block_bytes": 64, "launch.max_grid_num": 3})
    x, dy = torch.randn(n), torch.randn(n)
    y, dx, s = execute(lambda x, dy: (gelu(x, profile=profile),
                                      gelu_backward(dy, x, profile=profile),
                                      swiglu(x, dy, profile=profile)),
                       Mode.INTERPRETER, profile, (x, dy), takes_profile=False)
    xg = x.clone().requires_grad_()
    ref = torch.nn.functional.gelu(xg, approximate="tanh")
    ref.backward(dy)
    torch.testing.assert_close(y, ref.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dx, xg.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(s, torch.nn.functional.silu(x) * dy, rtol=1e-5, atol=1e-6)
