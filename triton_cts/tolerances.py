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


def tolerance(op, dtype: torch.dtype, profile: Profile) -> tuple[float, float]:
    """(rtol, atol) for ``op`` (an :class:`~triton_cts.registry.OpSpec`) on ``dtype``."""
    override = profile.tolerance_override(op.name, dtype)
    if override is not None:
        return override
    if dtype in op.tolerances:
        return op.tolerances[dtype]
    if dtype.is_floating_point:
        return DEFAULT.get(dtype, (1.25e-1, 1e-1))  # fp8: one 3-bit mantissa step
    return (0.0, 0.0)
