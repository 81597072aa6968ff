"""Rows whose length 16 does not divide still load 16-byte vectors (kernels/row_align.py):
the cross-compiled sm_90 code of the row kernels at 3000 columns, and the values the
launchers compute with the rebuilt row length."""
import re

import pytest
import torch
import triton

from kernels import row_align as ra
from kernels.layer_norm import forward as ln_forward
from kernels.layer_norm import layer_norm, layer_norm_backward
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
    monkeypatch.setattr(ln_forward, "row_align", lambda n, vector: 1)
    ln_forward._forward_plan.cache_clear()
    try:
        launches = execute(lambda x, w: layer_norm(x, w, w, profile=SM90), Mode.COMPILE, SM90,
                           (x, w), takes_profile=False)
        assert _vector_loads(launches) == {"_layer_norm_fwd_fused_kernel": False}
    finally:
        ln_forward._forward_plan.cache_clear()


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
