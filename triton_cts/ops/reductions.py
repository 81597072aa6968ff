"""Max and product reductions: over the whole tensor, and along the last dim."""
import math

import torch

from triton_cts.ops.spec import OpSpec, randn

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MAX_DTYPES = FLOATS + (torch.int32, torch.int64)

# max selects one input element: every float dtype is exact (indices are integers and
# compare exactly anyway).
EXACT = {dt: (0.0, 0.0) for dt in FLOATS}

# Products are checked on factors from _factors (below), whose exact product stays near
# e^N(0,1) for any n. A float32 product of n such factors, multiplied in any order (a
# binary tree, or grid-stride lanes then a tree), measured against float64: relative error
# 2e-6 at n = 65536, 2.4e-5 at 2^20, 1.5e-4 at 2^22 elements. Factors very close to 1
# (1 + x/sqrt(n)) are avoided: their rounding errors do not cancel and a float32 tree then
# errs by 6e-3 at 2^22. fp32: 4e-4 covers 2^22 elements. fp16: the final rounding (2^-11)
# plus that float32 error exceeds the default 1e-3 beyond ~2^21 elements, hence 2e-3.
# bf16's default 1.6e-2 covers both; float64 is far inside 1e-7. atol (1e-5) covers
# products that round to a subnormal or to 0 in the output dtype. (Beyond ~2^17 factors,
# rounding them to bf16 skews their product toward 0, and bf16 checks rest on atol.)
PROD_TOLERANCES = {torch.float32: (4e-4, 1e-5), torch.float16: (2e-3, 1e-5)}
#: Factors the rtol above was measured for; beyond them the bound grows with n
#: (_prod_error_scale) and the kernels multiply in float64 where the target has it
#: measured: benchmarks/results/h200.jsonl, experiment "comments"
PROD_MEASURED_FACTORS = 1 << 22


def _prod_error_scale(x: torch.Tensor, *, dim: int | None):
    """atol multiplier that adds rtol * (n / 2^22 - 1) * |product| for n > 2^22 factors."""
    n = x.numel() if dim is None else (x.shape[dim] if x.ndim else 1)
    if n <= PROD_MEASURED_FACTORS:
        return torch.ones((), dtype=x.dtype, device=x.device)
    rtol, atol = PROD_TOLERANCES[torch.float32]
    product = torch.prod(x) if dim is None else torch.prod(x, dim=dim)
    return 1.0 + rtol * (n / PROD_MEASURED_FACTORS - 1) * product.abs() / atol


def _factors(x: torch.Tensor, gen: torch.Generator, dim: int | None) -> torch.Tensor:
    """A new tensor in x's dtype whose product over ``dim`` (None: everything) is finite and
    far from trivial: exp(s * (x - mean) + L / n) with s = min(1/4, 10/sqrt(n)), n the
    reduction length and L ~ N(0, 1) per reduced slice, so each product is about e^L while
    every partial product stays within e^(+-30) (no overflow in any order). x is first
    standardized over its finite entries (clamped to 6 standard deviations), so every
    value kind (wide range, large offset, subnormal) gives such factors. Non-finite
    entries of x stay non-finite (nan -> nan, inf -> inf, -inf -> 0)."""
    if x.numel() == 0:
        return x.clone()
    z = x.double() if x.dim() else x.double().reshape(1)
    is_finite = torch.isfinite(z)
    if is_finite.any():
        vals = z[is_finite]
        spread = vals.std(unbiased=False) if vals.numel() > 1 else vals.new_tensor(0.0)
        spread = spread if spread > 0 else vals.new_tensor(1.0)
        standard = ((z - vals.mean()) / spread).clamp(-6.0, 6.0)
        z = torch.where(is_finite, standard, z)
    finite = torch.where(is_finite, z, torch.zeros_like(z))
    if dim is None:
        n = z.numel()
        mean = finite.sum() / n
        level = torch.randn((), generator=gen, dtype=torch.float64)
    else:
        n = z.shape[dim]
        mean = finite.sum(dim, keepdim=True) / n
        level = randn(mean.shape, gen, torch.float64, mean.device)
    scale = min(0.25, 10.0 / math.sqrt(n))
    y = torch.exp(scale * (z - mean) + level / n)
    return y.reshape(x.shape).to(x.dtype)


def _with_layout_of(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``y``'s values laid out as ``x`` is (same strides; gaps between elements hold 7, a
    value the op must never see), so the layout the suite drew reaches the implementation:
    a product that ignores strides reads the gaps."""
    if x.is_contiguous() or x.numel() == 0:
        return y
    size = 1 + sum((d - 1) * s for d, s in zip(x.shape, x.stride()))
    out = torch.full((size,), 7.0, dtype=y.dtype).as_strided(x.shape, x.stride())
    out.copy_(y)
    return out


def _prod_all_args(x, gen):
    return (_with_layout_of(_factors(x, gen, None), x),), {}


def _prod_dim_args(x, gen):
    return (_with_layout_of(_factors(x, gen, -1), x),), {}


def _max_all_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.max(x)


def _max_dim_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.max(x, dim=-1)
    return values, indices


def _prod_all_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.prod(x)


def _prod_dim_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.prod(x, dim=-1)


MAX_ALL = OpSpec(
    name="max_all",
    description="maximum over every element (torch.max(x)); NaN if any element is NaN",
    reference=_max_all_reference,
    reference_kernel="kernels.reductions:max_all",
    dtypes=MAX_DTYPES,
    make_args=lambda x, gen: ((x,), {}),
    min_ndim=0,
    max_ndim=4,
    tolerances=EXACT,
    compile_shapes=((4096,), (1024, 4096)),
    relations=("permutation_invariance",),
    # one launch, tl.atomic_max into a float32 / int accumulator (needs atomics.max support)
    variants={"atomic": "kernels.reductions:max_all_atomic"},
)

MAX_DIM = OpSpec(
    name="max_dim",
    description="(values, indices) of the maximum along the last dim (torch.max(x, dim=-1)); "
                "NaN wins, ties go to the first index",
    reference=_max_dim_reference,
    reference_kernel="kernels.reductions:max_dim",
    dtypes=MAX_DTYPES,
    make_args=lambda x, gen: ((x,), {}),
    min_ndim=0,
    max_ndim=4,
    tolerances=EXACT,
    # whole rows per block, and rows longer than MAX_FUSED_SIZE split in chunks
    compile_shapes=((1024, 4096), (8, 65536)),
)

PROD_ALL = OpSpec(
    name="prod_all",
    description="product of every element (torch.prod(x)), tree reduction; make_args "
                "maps the drawn input to factors whose product stays finite (see _factors)",
    reference=_prod_all_reference,
    reference_kernel="kernels.reductions:prod_all",
    dtypes=FLOATS,
    make_args=_prod_all_args,
    min_ndim=0,
    max_ndim=4,
    tolerances=PROD_TOLERANCES,
    error_scale=lambda x: _prod_error_scale(x, dim=None),
    compile_shapes=((4096,), (1024, 4096)),
    relations=("permutation_invariance",),
)

PROD_DIM = OpSpec(
    name="prod_dim",
    description="product along the last dim (torch.prod(x, dim=-1)), tree reduction; "
                "make_args maps the drawn input to factors whose products stay finite",
    reference=_prod_dim_reference,
    reference_kernel="kernels.reductions:prod_dim",
    dtypes=FLOATS,
    make_args=_prod_dim_args,
    min_ndim=0,
    max_ndim=4,
    tolerances=PROD_TOLERANCES,
    compile_shapes=((1024, 4096), (8, 65536)),
)

OPS = (MAX_ALL, MAX_DIM, PROD_ALL, PROD_DIM)
