"""Tolerance policy, as data: per-dtype defaults, then op overrides, then profile overrides."""
from __future__ import annotations

import torch

from triton_cts.profiles import Profile

#: torch.testing.assert_close defaults (rtol, atol); integers compare exactly.
DEFAULT: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}


def tolerance(op, dtype: torch.dtype, profile: Profile, mode=None) -> tuple[float, float]:
    """(rtol, atol) for ``op`` (an :class:`~triton_cts.ops.spec.OpSpec`) on ``dtype``:
    the profile's override, else tf32's bound where float32 dots really run as tf32 (a
    device whose profile says ``dtypes.tf32``; the interpreter computes IEEE float32),
    else the op's own, else torch's default for the dtype."""
    override = profile.tolerance_override(op.name, dtype)
    if override is not None:
        return override
    if (dtype == torch.float32 and op.tf32_tolerance is not None and profile["dtypes.tf32"]
            and str(mode) == "device"):
        return op.tf32_tolerance
    if dtype in op.tolerances:
        return op.tolerances[dtype]
    if dtype.is_floating_point:
        return DEFAULT.get(dtype, (1.25e-1, 1e-1))  # fp8: one 3-bit mantissa step
    return (0.0, 0.0)
