"""The two-pass row kernels hint the L2 (kernels/l2_hints.py) where the profile says the
target honours it: the cross-compiled sm_90 code of each long-row kernel at 65536 columns
carries the eviction policies the launcher chose, and a profile without
``io.l2_eviction_hints`` compiles the same kernels without any."""
import re

import pytest
import torch
import triton

from kernels.l2_hints import l2_hints
from kernels.layer_norm import (layer_norm, layer_norm_backward, layer_norm_backward_columns,
                                layer_norm_backward_tiled, rms_norm)
from kernels.softmax import softmax, softmax_backward_looped
from triton_cts.execution.modes import Mode, execute
from triton_cts.profiles import load_profiles
from triton_cts.toolchains.cross_compile import specialize, use_project_cache

use_project_cache()
PROFILES = load_profiles()
SM90 = PROFILES["nvidia-sm90"]


def _long_rows(x, w):
    profile = _long_rows.profile
    out = layer_norm(x, w, w, profile=profile)
    layer_norm_backward(x, x, w, w, out.mean, out.rstd, profile=profile)  # row groups
    layer_norm_backward_columns(x, x, w, w, out.mean, out.rstd, profile=profile)
    layer_norm_backward_tiled(x, x, w, w, out.mean, out.rstd, profile=profile)
    rms_norm(x, w, profile=profile)
    y = softmax(x, profile=profile)
    softmax_backward_looped(x, y, profile=profile)


def _policies(profile) -> dict[str, set[str]]:
    """kernel name (layer norm and RMS norm told apart) -> L2 policies in its PTX."""
    _long_rows.profile = profile
    x, w = torch.randn(2, 65536).bfloat16(), torch.randn(65536).bfloat16()
    launches = execute(_long_rows, Mode.COMPILE, profile, (x, w), takes_profile=False)
    found = {}
    for launch in launches:
        src, options = specialize(launch, profile.gpu_target())
        ptx = triton.compile(src, target=profile.gpu_target(), options=options).asm["ptx"]
        name = launch.name + ("[rms]" if launch.kwargs.get("IS_RMS") else "")
        found[name] = set(re.findall(r"L2::(evict_\w+)", ptx))
    return found


def test_two_pass_kernels_keep_the_first_read_and_stream_the_second():
    found = _policies(SM90)
    both = {"evict_last", "evict_first"}
    assert found["_layer_norm_bwd_dx_tiled_kernel"] == both
    assert found["_layer_norm_fwd_tiled_kernel[rms]"] == both
    assert found["_softmax_fwd_online_kernel"] == both
    assert found["_softmax_bwd_looped_kernel"] == both
    # layer norm's first pass measured faster unhinted: only the second is streamed
    assert found["_layer_norm_fwd_tiled_kernel"] == {"evict_first"}
    # the one-pass dweight/dbias kernel reads each element once: no hint
    assert found["_layer_norm_bwd_dwdb_kernel"] == set()
    # the column backward's row sums read x and dy once (the column kernel reads them
    # again only after every row): streamed; the column kernel's one pass: no hint
    assert found["_layer_norm_bwd_row_sums_kernel"] == {"evict_first"}
    assert found["_layer_norm_bwd_columns_kernel"] == set()
    # the row groups read each element once
    assert found["_layer_norm_bwd_row_groups_kernel"] == set()


def test_a_profile_without_the_field_gives_no_hints():
    plain = SM90.derive(**{"io.l2_eviction_hints": False})
    assert l2_hints(plain) == {"KEEP": "", "STREAM": ""}
    found = _policies(plain)
    assert len(found) >= 6 and not any(found.values()), found


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_only_profiles_that_say_so_hint(name):
    profile = PROFILES[name]
    hints = l2_hints(profile)
    assert bool(hints["STREAM"]) == profile.l2_eviction_hints
    assert l2_hints(profile, keep=False)["KEEP"] == ""
