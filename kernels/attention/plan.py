"""Host side of the attention launchers: input checks (remembered per input signature), the
profile's tile configs with the shared-memory estimate that picks among them, and the
family's tuning (``[tuning.attention]``, declared here)."""
import torch

from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               check_inputs)
from triton_cts.ops.attention import MAX_HEAD_DIM
from triton_cts.profiles import Profile, next_power_of_2
from triton_cts.profiles.fields import flag
from triton_cts.profiles.tuning import declare_tuning
from ..fast_launch import PassedChecks, signature

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
#: 1 / ln(2): scores are exponentiated in base 2.
LOG2E = 1.4426950408889634

FAMILY = "attention"
TUNING = declare_tuning(FAMILY, {
    "backward_single_launch": flag(
        "whether the backward launches its dk/dv and dq tiles in one launch where all of "
        "them fit one program per compute unit (limits.compute_units); two launches always "
        "where absent"),
})


def backward_single_launch(profile: Profile) -> bool:
    """Whether the backward launches its dk/dv and dq tiles together where they all fit one
    program per compute unit."""
    return profile.tuning(FAMILY)["backward_single_launch"]

def _default_configs(profile: Profile, table: str) -> list[dict[str, int]]:
    """Used ONLY where the profile has no attention table: small tiles, unpipelined."""
    tiles = {"BLOCK_M": 64, "BLOCK_N": 32} if table == "attention" else \
        {"BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32}
    return [tiles | {"num_warps": profile["launch.default_num_warps"], "num_stages": 1}]


def _tiles_bytes(stages: int, elem: int, block_d: int, resident: int, streamed: int,
                 m: int, n: int) -> int:
    """Shared memory of a kernel's tiles, estimated: ``resident`` rows of the head dim stay,
    ``streamed`` rows a step are pipelined num_stages deep, one [m, n] tile is staged."""
    return elem * ((resident + max(stages, 1) * streamed) * block_d + m * n)


def _fwd_need(c, elem, block_d):
    m, n = c["BLOCK_M"], c["BLOCK_N"]
    return _tiles_bytes(c.get("num_stages", 1), elem, block_d, m, 2 * n, m, n)


def _bwd_need(c, elem, block_d):
    """The larger of the dk/dv kernel (k, v stay; q, do stream) and the dq kernel."""
    stages = c.get("num_stages", 1)
    m1, n1, m2, n2 = c["BLOCK_M1"], c["BLOCK_N1"], c["BLOCK_M2"], c["BLOCK_N2"]
    return max(_tiles_bytes(stages, elem, block_d, 2 * n1, 2 * m1, m1, n1),
               _tiles_bytes(stages, elem, block_d, 2 * m2, 2 * n2, m2, n2))


def _launch_options(cfg: dict) -> dict:
    """A config's launch options (num_warps, num_stages, waves_per_eu): all but its tiles."""
    return {k: v for k, v in cfg.items() if not k.startswith("BLOCK_")}


def _config(profile: Profile, table: str, dtype: torch.dtype, block_d: int, need) -> dict:
    """The first config of the profile's ``autotune.<table>`` whose tiles fit its shared
    memory (``need(cfg, elem, block_d)`` bytes), else the smallest."""
    configs = profile.autotune_configs(table) or _default_configs(profile, table)
    elem = dtype.itemsize
    limit = profile["limits.shared_memory_per_block"]
    fits = [c for c in configs if need(c, elem, block_d) <= limit]
    return fits[0] if fits else min(configs, key=lambda c: need(c, elem, block_d))


def _check(q, k, v, causal, causal_offset, profile, op="attention", **more):
    """(B, H, H_kv, Sq, Sk, D) after checking shapes, dtypes and options."""
    check_inputs(op, profile, DTYPES + (torch.float64,), q=q, k=k, v=v, **more)
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ShapeMismatchError(f"{op}: need q (B, H, Sq, D) and k, v (B, H_kv, Sk, D), got "
                                 f"q={tuple(q.shape)}, k={tuple(k.shape)}, v={tuple(v.shape)}")
    (B, H, Sq, D), (Bk, H_kv, Sk, Dk) = q.shape, k.shape
    if k.shape != v.shape or Bk != B or Dk != D:
        raise ShapeMismatchError(f"{op}: k and v must be (B, H_kv, Sk, D) with q's B and D, got "
                                 f"q={tuple(q.shape)}, k={tuple(k.shape)}, v={tuple(v.shape)}")
    if H_kv == 0 and H != 0 or H_kv and H % H_kv:
        raise ShapeMismatchError(f"{op}: key/value heads ({H_kv}) must divide query heads ({H})")
    if D > MAX_HEAD_DIM:
        raise ShapeMismatchError(f"{op}: head dim {D} is above the kernels' limit {MAX_HEAD_DIM}")
    if any(t is not None and t.shape != q.shape for t in more.values()):
        raise ShapeMismatchError(f"{op}: do must have q's shape {tuple(q.shape)}")
    if len({t.dtype for t in (q, k, v, *more.values()) if t is not None}) != 1:
        raise UnsupportedDtypeError(f"{op}: q, k, v must have one dtype, got {q.dtype}, "
                                    f"{k.dtype}, {v.dtype}")
    if str(q.dtype).removeprefix("torch.") not in profile["dtypes.dot"]:
        raise UnsupportedDtypeError(f"{op}: profile '{profile.name}' has no tl.dot for "
                                    f"{q.dtype} (dtypes.dot in {profile.source})")
    if causal_offset and not causal:
        raise ValueError(f"{op}: causal_offset={causal_offset} needs causal=True")
    return B, H, H_kv, Sq, Sk, D


#: Shapes of inputs that passed :func:`_check`, per profile, options and signature.
_CHECKS = PassedChecks()


def checked_shapes(q, k, v, causal, causal_offset, profile, op="attention", **more):
    """:func:`_check`'s (B, H, H_kv, Sq, Sk, D), checked once per profile, op, options and
    input signature on a GPU (every call elsewhere)."""
    key = (op, causal, causal_offset, signature(q, k, v, *more.values()))
    return _CHECKS.checked(profile, key, q,
                           lambda: _check(q, k, v, causal, causal_offset, profile, op, **more))


def _common(dtype, profile, causal, D):
    """Keyword arguments every kernel takes."""
    block_d = max(16, next_power_of_2(D))
    # float32 dots IEEE even with tf32, as in torch (tf32 erred 30% on wide_range)
    # measured: benchmarks/results/h100.jsonl, experiment "comments"
    return dict(SELECT_LOADS=profile.select_loads, BLOCK_D=block_d, EVEN_D=D == block_d), \
        dict(CAUSAL=bool(causal), FP64=dtype == torch.float64, INPUT_PRECISION="ieee")

