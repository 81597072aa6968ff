"""Layer norm and RMS norm over the last dim: forward, backward, and the prenorm options.

The references compute in float64 from the same (upcast) inputs. The backward references
differentiate the float64 forward with autograd; they take ``mean``/``rstd`` only because
the launchers do (make_args computes them in float64 and rounds them to the statistics'
dtype, float32, or float64 for float64 inputs, as the forward saves them).
"""
import math

import torch
import torch.nn.functional as F

from triton_cts.ops import error_models
from triton_cts.ops.spec import OpSpec, randn

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-6

#: Forward: y keeps torch's bounds; float32 outputs get atol 1e-3, a wide-range float32
#: mean rounds at its partial sums' scale (one bound serves every output)
#: measured: benchmarks/results/h200.jsonl, experiment "comments"
FORWARD_TOLERANCES = {torch.float32: (1.3e-6, 1e-3)}

#: Backward: dweight/dbias reduce over all rows, so their error grows with R (atol 1e-3);
#: fp16/bf16 keep their rtol, float64 the default
#: measured: benchmarks/results/h200.jsonl, experiment "comments"
BACKWARD_TOLERANCES = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-3),
    torch.float32: (1.3e-6, 1e-3),
}


def _stat_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _randn_like_row(x, gen):
    """A [N] vector (weight, bias) for x's rows."""
    return randn(x.shape[-1], gen, x.dtype, x.device)


# ---- layer_norm ---------------------------------------------------------------------
def _layer_norm_ref(x, weight, bias, eps):
    mean = x.mean(-1)
    rstd = torch.rsqrt(x.var(-1, unbiased=False) + eps)
    y = (x - mean[..., None]) * rstd[..., None] * weight
    if bias is not None:
        y = y + bias
    return y, mean, rstd


def layer_norm_reference(x, weight, bias, eps=LAYER_NORM_EPS):
    return _layer_norm_ref(x, weight, bias, eps)


def layer_norm_conditioning(x, weight, bias, eps=LAYER_NORM_EPS, *, dtype):
    """(y, mean, rstd) error bounds of a correct implementation computing ``dtype`` inputs
    in float32 (float64 for float64; triton_cts/ops/error_models.py): rows whose mean dwarfs
    their spread."""
    dmu, rel, rstd, mean = error_models.mean_subtraction_error(
        x, (-1,), eps, error_models.compute_roundoff(dtype))
    y = error_models.normalised_output_error(x, mean, rstd, dmu, rel, weight)
    return y, dmu.squeeze(-1), (rstd * rel).nan_to_num(0.0, 0.0, 0.0).squeeze(-1)


def layer_norm_args(x, gen):
    return (x, _randn_like_row(x, gen), _randn_like_row(x, gen)), {"eps": LAYER_NORM_EPS}


LAYER_NORM = OpSpec(
    name="layer_norm",
    description="layer norm over the last dim, forward: (y, mean, rstd)",
    reference=layer_norm_reference,
    reference_kernel="kernels.layer_norm:layer_norm_forward",
    autograd="kernels.layer_norm:layer_norm_autograd",
    dtypes=FLOATS,
    make_args=layer_norm_args,
    min_ndim=1,
    max_ndim=4,
    tolerances=FORWARD_TOLERANCES,
    conditioning=layer_norm_conditioning,
    compile_shapes=((1024, 4096), (4096, 128), (16, 65536)),  # last: tiled or row groups
    relations=("shift_invariance", "scale_invariance"),
    variants={"row_groups": "kernels.layer_norm:layer_norm_forward_row_groups"},
    # no atomics, and each row's statistics are combined in a fixed order
    deterministic=("reference", "reference/row_groups"),
)


# ---- layer_norm_backward ------------------------------------------------------------
def layer_norm_backward_reference(dy, x, weight, bias, mean, rstd):
    x, weight, bias = (t.detach().requires_grad_() for t in (x, weight, bias))
    y = F.layer_norm(x, x.shape[-1:], weight, bias, LAYER_NORM_EPS)
    return torch.autograd.grad(y, (x, weight, bias), dy)


def _grads_at_given_stats(dy, x, weight, mean, rstd):
    """(dx, dweight, dbias) of layer norm (RMS norm when mean is None) computed from the
    statistics as given, in float64: what a backward that trusts its inputs returns."""
    xhat = (x - (0 if mean is None else mean[..., None])) * rstd[..., None]
    g = dy * weight
    dx = g - xhat * (g * xhat).mean(-1, keepdim=True)
    if mean is not None:
        dx = dx - g.mean(-1, keepdim=True)
    rows = tuple(range(dy.dim() - 1))
    return rstd[..., None] * dx, (dy * xhat).sum(rows), dy.sum(rows)


def _gap(a, b):
    return (a - b).abs().nan_to_num(0.0, 0.0, 0.0)


def layer_norm_backward_ambiguity(dy, x, weight, bias, mean, rstd):
    """The saved mean and rstd are float32 roundings of the exact statistics. Kernels may
    use them as given (as torch's backward does) or recompute them (this project's
    kernels re-centre the row): both are right, and for a large mean relative to the
    spread they differ by far more than rounding. The gap between the two is allowed."""
    exact = layer_norm_backward_reference(dy, x, weight, bias, mean, rstd)
    return tuple(_gap(a, b) for a, b in zip(exact, _grads_at_given_stats(dy, x, weight, mean, rstd)))


def rms_norm_backward_ambiguity(dy, x, weight, rstd):
    """As :func:`layer_norm_backward_ambiguity`, for the saved float32 rstd."""
    exact = rms_norm_backward_reference(dy, x, weight, rstd)
    return tuple(_gap(a, b) for a, b in zip(exact, _grads_at_given_stats(dy, x, weight, None, rstd)))


def layer_norm_backward_args(x, gen):
    weight, bias = _randn_like_row(x, gen), _randn_like_row(x, gen)
    dy = randn(x.shape, gen, x.dtype, x.device)
    _, mean, rstd = _layer_norm_ref(x.double(), weight.double(), bias.double(), LAYER_NORM_EPS)
    stat = _stat_dtype(x)
    return (dy, x, weight, bias, mean.to(stat), rstd.to(stat)), {}


LAYER_NORM_BACKWARD = OpSpec(
    name="layer_norm_backward",
    description="layer norm over the last dim, backward: (dx, dweight, dbias)",
    reference=layer_norm_backward_reference,
    ambiguity=layer_norm_backward_ambiguity,
    reference_kernel="kernels.layer_norm:layer_norm_backward",
    dtypes=FLOATS,
    make_args=layer_norm_backward_args,
    min_ndim=1,
    max_ndim=4,
    tolerances=BACKWARD_TOLERANCES,
    compile_shapes=((1024, 4096), (4096, 128), (16, 65536)),
    relations=("gradient_rows_sum_to_zero",),
    variants={
        "atomic": "kernels.layer_norm:layer_norm_backward_atomic",
        "partial": "kernels.layer_norm:layer_norm_backward_partial",
        "tiled": "kernels.layer_norm:layer_norm_backward_tiled",
        "columns": "kernels.layer_norm:layer_norm_backward_columns",
        "row_groups": "kernels.layer_norm:layer_norm_backward_row_groups",
    },
    # partial sums in a fixed order (the default strategies: partial where a row fits the
    # fused tile, row groups or columns beyond)
    deterministic=("reference", "reference/partial", "reference/columns",
                   "reference/row_groups"),
)


# ---- rms_norm -----------------------------------------------------------------------
def _rms_norm_ref(x, weight, eps):
    rstd = torch.rsqrt(x.pow(2).mean(-1) + eps)
    return x * rstd[..., None] * weight, rstd


def rms_norm_reference(x, weight, eps=RMS_NORM_EPS):
    return _rms_norm_ref(x, weight, eps)


RMS_NORM = OpSpec(
    name="rms_norm",
    description="RMS norm over the last dim, forward: (y, rstd)",
    reference=rms_norm_reference,
    reference_kernel="kernels.layer_norm:rms_norm",
    autograd="kernels.layer_norm:rms_norm_autograd",
    dtypes=FLOATS,
    make_args=lambda x, gen: ((x, _randn_like_row(x, gen)), {"eps": RMS_NORM_EPS}),
    min_ndim=1,
    max_ndim=4,
    compile_shapes=((1024, 4096), (4096, 128), (16, 65536)),
    relations=("scale_invariance",),
)


def rms_norm_backward_reference(dy, x, weight, rstd):
    x, weight = x.detach().requires_grad_(), weight.detach().requires_grad_()
    y, _ = _rms_norm_ref(x, weight, RMS_NORM_EPS)
    return torch.autograd.grad(y, (x, weight), dy)


def rms_norm_backward_args(x, gen):
    weight = _randn_like_row(x, gen)
    dy = randn(x.shape, gen, x.dtype, x.device)
    _, rstd = _rms_norm_ref(x.double(), weight.double(), RMS_NORM_EPS)
    return (dy, x, weight, rstd.to(_stat_dtype(x))), {}


RMS_NORM_BACKWARD = OpSpec(
    name="rms_norm_backward",
    description="RMS norm over the last dim, backward: (dx, dweight)",
    reference=rms_norm_backward_reference,
    ambiguity=rms_norm_backward_ambiguity,
    reference_kernel="kernels.layer_norm:rms_norm_backward",
    dtypes=FLOATS,
    make_args=rms_norm_backward_args,
    min_ndim=1,
    max_ndim=4,
    tolerances=BACKWARD_TOLERANCES,
    compile_shapes=((1024, 4096), (4096, 128), (16, 65536)),
    deterministic=("reference",),  # layer_norm_backward's partial-sum strategy
)


# ---- layer_norm_residual_dropout ----------------------------------------------------
#: Philox4x32 constants (Salmon et al., "Random123"), as tl.rand uses them.
PHILOX_ROUND_A, PHILOX_ROUND_B = 0xD2511F53, 0xCD9E8D57
PHILOX_KEY_A, PHILOX_KEY_B = 0x9E3779B9, 0xBB67AE85
PHILOX_ROUNDS = 10
MASK32 = 0xFFFFFFFF
#: tl.rand's uint32 -> [0, 1) scale: the largest with MAX_INT32 * scale < 1 in float32.
UNIFORM_SCALE = torch.tensor(4.6566127342e-10, dtype=torch.float32)
#: Elements per chunk of the reference keep-mask (about 10 int64 words of scratch each).
PHILOX_CHUNK = 1 << 22


def philox_uniform(seed: int, offsets: torch.Tensor) -> torch.Tensor:
    """``tl.rand(seed, offsets)`` in torch, bit for bit, on the offsets' device: the first
    Philox4x32-10 word of counter (offset low, offset high, 0, 0) under key (seed low,
    seed high), folded to a non-negative int32 and scaled to float32. Words are held in
    int64: a product of two 32-bit words wraps modulo 2^64 and its high word is taken
    with a shift and a mask."""
    c0, c1 = offsets & MASK32, (offsets >> 32) & MASK32
    c2 = c3 = torch.zeros_like(c0)
    k0, k1 = seed & MASK32, (seed >> 32) & MASK32
    for _ in range(PHILOX_ROUNDS):
        prod_b, prod_a = PHILOX_ROUND_B * c2, PHILOX_ROUND_A * c0
        c0, c2, c1, c3 = (((prod_b >> 32) & MASK32) ^ c1 ^ k0,
                          ((prod_a >> 32) & MASK32) ^ c3 ^ k1,
                          prod_b & MASK32, prod_a & MASK32)
        k0 = (k0 + PHILOX_KEY_A) & MASK32
        k1 = (k1 + PHILOX_KEY_B) & MASK32
    bits = torch.where(c0 >= 1 << 31, c0 - (1 << 32), c0)  # the word as an int32
    bits = torch.where(bits < 0, ~bits, bits)
    return bits.to(torch.float32) * UNIFORM_SCALE.to(bits.device)


def dropout_keep_mask(shape, seed: int, dropout_p: float, device=None) -> torch.Tensor:
    """The kernel's keep-mask: element i of the flattened tensor is kept when
    tl.rand(seed, i) > dropout_p (compared in float32). Computed in chunks, so a mask of
    2^31 elements needs a few hundred MiB of scratch, not the host's memory."""
    n = math.prod(shape)
    keep = torch.empty(n, dtype=torch.bool, device=device)
    p = torch.tensor(dropout_p, dtype=torch.float32, device=device)
    for start in range(0, n, PHILOX_CHUNK):
        offsets = torch.arange(start, min(n, start + PHILOX_CHUNK), dtype=torch.int64,
                               device=device)
        keep[start:start + offsets.numel()] = philox_uniform(seed, offsets) > p
    return keep.reshape(shape)


def _float32_valued(*tensors) -> bool:
    """Whether every value survives a round trip through float32 (inputs drawn in
    float16/bfloat16/float32 and upcast for the reference do; float64 draws do not)."""
    for t in tensors:
        back = t.to(torch.float32).to(t.dtype)
        if not bool(((back == t) | (t.isnan() & back.isnan())).all()):
            return False
    return True


def layer_norm_residual_dropout_reference(x, weight, bias, residual, rowscale,
                                          eps=LAYER_NORM_EPS, *, dropout_p, seed):
    # the mask is recomputed from (seed, element index) with the same Philox stream as
    # tl.rand, so it is checked exactly rather than taken from the kernel
    # integer arithmetic and one float32 product, bit for bit the same on any device: on a
    # GPU when there is one (134M elements took 43 s on one CPU thread)
    on_gpu = x.device.type == "cpu" and torch.cuda.is_available()
    keep = dropout_keep_mask(tuple(x.shape), seed, dropout_p,
                             device="cuda" if on_gpu else x.device).to(x.device)
    # a dropped element is 0 even where x is inf or NaN (selected, not multiplied by 0)
    x_in = torch.where(keep, x * rowscale[..., None] / (1.0 - dropout_p), 0.0) + residual
    # x' is an intermediate the kernel holds in float32 (float64 for float64 inputs). When
    # |x'| >> its spread (large-offset inputs) y depends on x' to the last bit, so x' is
    # rounded as the kernel's is: make_args keeps rowscale and 1 / (1 - p) powers of two,
    # so the kernel's x * rowscale / (1 - p) is exact and the residual add is its only
    # rounding, the same one as rounding the exact sum here
    if _float32_valued(x, residual, rowscale):
        x_in = x_in.to(torch.float32).to(x_in.dtype)
    y, mean, rstd = _layer_norm_ref(x_in, weight, bias, eps)
    return y, x_in, mean, rstd, keep


def layer_norm_residual_dropout_args(x, gen):
    weight, bias = _randn_like_row(x, gen), _randn_like_row(x, gen)
    residual = randn(x.shape, gen, x.dtype, x.device)
    # powers of two (0.5, 1, 2) and dropout_p = 0.5: exact scalings (see the reference)
    rowscale = torch.pow(2.0, torch.randint(-1, 2, x.shape[:-1], generator=gen)).to(x)
    seed = int(torch.randint(0, 2**31 - 1, (), generator=gen))
    return ((x, weight, bias, residual, rowscale),
            {"eps": LAYER_NORM_EPS, "dropout_p": 0.5, "seed": seed})


LAYER_NORM_RESIDUAL_DROPOUT = OpSpec(
    name="layer_norm_residual_dropout",
    description="prenorm layer norm of dropout(x * rowscale) + residual, forward: "
                "(y, residual_out, mean, rstd, dropout_mask)",
    reference=layer_norm_residual_dropout_reference,
    reference_kernel="kernels.layer_norm:layer_norm_residual_dropout",
    dtypes=FLOATS,
    make_args=layer_norm_residual_dropout_args,
    min_ndim=1,
    max_ndim=4,
    tolerances=FORWARD_TOLERANCES,
    compile_shapes=((1024, 4096), (16, 65536)),
)


OPS = (LAYER_NORM, LAYER_NORM_BACKWARD, RMS_NORM, RMS_NORM_BACKWARD,
       LAYER_NORM_RESIDUAL_DROPOUT)
