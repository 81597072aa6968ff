"""The tolerance policy: when an implementation's output is close enough to the truth.

1. The truth is the op's torch reference computed in float64 on float64 copies of the
   inputs (``OpSpec.reference``).
2. The model: ``|out - ref| <= atol + rtol * |ref|`` elementwise, with (rtol, atol) from
   :func:`tolerance` (a profile override, else tf32's bound for float32 dots on a tf32
   device, else the op's own, else torch.testing's default for the dtype). Where the
   error an implementation makes grows with the operation count or the inputs rather
   than the result, the op states the model: ``OpSpec.error_scale`` multiplies atol (a
   dot product of K terms, a product of n factors past the count its rtol was measured
   for), ``OpSpec.conditioning`` and ``OpSpec.ambiguity`` add what any correct
   implementation may err by at ill-conditioned inputs, or the gap between two right
   answers. Each model is written beside its op in ``triton_cts/ops/``.
3. The second oracle: a model can be too tight where rounding errors correlate (a
   float32 product of 1.49M factors of a few distinct values erred by 8.3e-4 against an
   rtol of 4e-4 fitted to independent errors). So where an output is out of its bound,
   torch's own implementation of the op is run on the same inputs in the same dtype on
   the same device, and measured against the same bound. The output fails only if it is
   out of the bound and its worst error-to-bound ratio is more than
   :data:`CLEARLY_WORSE_THAN_TORCH` times torch's (when torch is within the bound, that is
   any excess). A pass that rests on torch's error is recorded as such in the report.
"""
from __future__ import annotations

import torch

from triton_cts.profiles import DTYPES, Profile
from triton_cts.profiles.schema import DEFAULT_TOLERANCES, OTHER_FLOAT_TOLERANCE

#: torch.testing.assert_close defaults (rtol, atol); integers compare exactly. The table
#: lives in the profile schema, which also holds profile overrides against it.
DEFAULT: dict[torch.dtype, tuple[float, float]] = {
    DTYPES[name]: tol for name, tol in DEFAULT_TOLERANCES.items()}


#: How much worse than torch's own same-dtype result, as multiples of the bound, an output
#: beyond the model may be before it fails: twice, so that an implementation that rounds
#: in another order than torch passes, and one that is wrong (errors of many times the
#: bound, or in elements torch gets right) fails.
CLEARLY_WORSE_THAN_TORCH = 2.0


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
        return DEFAULT.get(dtype, OTHER_FLOAT_TOLERANCE)  # fp8: one 3-bit mantissa step
    return (0.0, 0.0)
