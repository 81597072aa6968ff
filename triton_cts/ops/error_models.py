"""How far a correct float implementation of a mean-subtracting normalisation (layer norm,
batch norm) may be from the exact result, at given inputs.

Such an op computes a mean of n values, subtracts it and divides by the spread. The mean
is a sum, and a sum of n values in a precision of unit roundoff u errs by up to about
sqrt(n) * u * mean|x| (summed in any order: sequentially, per lane then as a tree,
pairwise, or Welford's update; the worst case n * u * mean|x| needs every rounding to go
the same way). That error does not shrink with the spread: for values around 5000 with a
spread of 0.1 it is half a percent of the spread, and torch's own float32 layer norm is
off by 0.048 in y on such rows (atol 1e-3). The statistics then carry it:

- the mean: dmu = C * sqrt(n) * u * mean|x|;
- rstd (or invstd), relative: t + t^2 / 2 + C * sqrt(n) * u, where t = dmu * rstd is the
  mean's error in units of the spread (first order: the variance sums squares of
  deviations from the computed mean, and running updates such as Welford's carry the
  mean's error into every term; second order: a two-pass variance is off by dmu^2);
- y = (x - mean) * rstd * w + b: |w| * rstd * dmu + |w| * |x - mean| * rstd * (rstd's
  relative error).

C = 4: over rows of the suites' value kinds (normal, large offset, wide range, ties;
n from 1 to 4093) the mean of a sequential float32 sum reached 2.2 * sqrt(n) * u *
mean|x|, a pairwise or per-lane sum 1.0, Welford's update 1.4 and torch.mean 1.2; torch's
float32 layer norm stayed within 0.17 (y) and 0.07 (rstd) of the resulting bound. A
mean-free variance, E[x^2] - E[x]^2, errs by about u * mean^2 / var relative to the
variance: far beyond the bound wherever it matters (mean / spread above 1 / sqrt(u)).
"""
from __future__ import annotations

import math

import torch

#: The constant C above.
SUM_ERROR_C = 4.0


def compute_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff of the precision an input of ``dtype`` is computed in: float64 for
    float64, float32 for every narrower float (kernels upcast 16-bit inputs)."""
    return float(torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps) / 2


def storage_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff of ``dtype`` itself: what a value rounded to the input dtype (an
    intermediate stored in it) loses."""
    return float(torch.finfo(dtype).eps) / 2


def mean_subtraction_error(x: torch.Tensor, dims: tuple[int, ...], eps: float, u: float):
    """(dmu, rel_rstd, rstd, mean), shaped like x reduced over ``dims`` with keepdim, for
    float64 ``x``: the error bound of the computed mean, the relative error bound of the
    computed rstd = 1/sqrt(var + eps), and the exact rstd and mean."""
    n = 1
    for d in dims:
        n *= x.shape[d]
    if n == 0:
        zeros = torch.zeros_like(x.sum(dims, keepdim=True))
        return zeros, zeros, zeros, zeros
    mean = x.mean(dims, keepdim=True)
    rstd = torch.rsqrt(x.var(dims, unbiased=False, keepdim=True) + eps)
    grow = SUM_ERROR_C * math.sqrt(n) * u
    # non-finite inputs give non-finite statistics: the bound does not apply there
    magnitude = x.abs().nan_to_num(0.0, 0.0, 0.0).mean(dims, keepdim=True)
    dmu = grow * magnitude
    t = (dmu * rstd).nan_to_num(0.0, 0.0, 0.0)
    rel = t + t * t / 2 + grow
    return dmu, rel, rstd, mean


def normalised_output_error(x, mean, rstd, dmu, rel, weight):
    """The bound on y = (x - mean) * rstd * weight + bias (weight broadcast against x)."""
    w = weight.abs() if weight is not None else torch.ones((), dtype=x.dtype)
    centred = (x - mean).abs().nan_to_num(0.0, 0.0, 0.0)
    out = w * (rstd * dmu + centred * rstd * rel)
    return out.nan_to_num(0.0, 0.0, 0.0)
