"""Fused linear + cross-entropy: cross_entropy(x @ weight^T + bias, labels) and its gradients.

The op returns ``(loss, grad_x, grad_weight)``, and ``grad_bias`` after them where a bias
is given: the loss (float32, per token for reduction "none", else a scalar) and the
gradients of the loss for an upstream gradient of 1 (of the sum of the tokens' losses for
"none"), each in its input's dtype. The float64 reference is computed UNFUSED: the whole
logits ``x @ weight^T + bias``, cross_entropy's reference on them (torch's
``F.cross_entropy`` and its autograd gradient of the logits, 0 in ignored rows), then the
linear layer's chain rule. A fused implementation (chunked, never holding the logits)
must give the same answer.

make_args takes the drawn tensor as x ``[tokens, hidden]`` and draws, from the
generator: V (at most 130 classes and about 65k weight elements, so interpreter runs stay
short), the weight ``[V, hidden]`` with entries of standard deviation 1/sqrt(hidden),
shrunk where x is large so that the logits stay within about +-4 standard deviations of
size 4 (a trained head's logits are of that order; float16 logits of value kinds up to
1e4 would otherwise overflow to inf in any implementation that stores them, torch's
included), a bias half the time, and the labels, ignore index, label smoothing and
reduction as cross_entropy's make_args draws them (about one row in eight ignored, never
the first).

Error model (``_conditioning``, absolute, added to atol; dtype = the inputs'):

- the logits: a dot product of ``hidden`` terms accumulated in float32, bounded as
  matmul's model does, by the terms |x| @ |w|^T times gamma(hidden) = u * max(C sqrt(K),
  2 K / MMA_DEPTH) (random rounding, or the tensor-core accumulator's truncation of
  ``ULPS_PER_MMA_STEP`` per 16-deep step), plus their rounding to the input dtype (the
  matmul's output dtype, as torch's linear gives them), twice with a bias: delta_ij;
- the loss of a row: cross_entropy's own model on the exact logits
  (``cross_entropy._error_scale``, in units of its atol), plus the logits' error
  propagated: |d(lse - z_y)| <= 2 max_j delta_ij (the smoothing term alike);
- dlogits: cross_entropy's gradient model, plus softmax's response to the logits' error,
  p_j (exp(2 delta) - 1) capped at 1, plus their rounding to the input dtype;
- grad_x = dlogits @ weight, grad_weight = dlogits^T @ x, grad_bias = the column sums of
  dlogits: the dlogits bound carried through |weight| (|x|, 1), plus the dot
  products' own gamma and the rounding of each chunk's product to the input dtype,
  relative to |dlogits| @ |weight| (|dlogits|^T @ |x|, column sums of |dlogits|); the
  mean's 1/count scales all of it.

Non-finite inputs give non-finite outputs, where the bound does not apply (0 there).
"""
from __future__ import annotations

import math

import torch

from triton_cts.ops import cross_entropy as ce
from triton_cts.ops.error_models import SUM_ERROR_C, compute_roundoff, storage_roundoff
from triton_cts.ops.matmul import MMA_DEPTH, ULPS_PER_MMA_STEP
from triton_cts.ops.spec import OpSpec

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
#: Largest V make_args draws, and the most weight elements (V x hidden) it makes.
MAX_CLASSES = 130
MAX_WEIGHT_NUMEL = 1 << 16
#: Logits' scale make_args aims for where x is large (see the module docstring).
LOGIT_SCALE = 4.0
#: V of the weight built for meta inputs (launches captured at full size, up to 2^31 rows:
#: shapes, no values). Small, so that the chunks (at most a 16th of the device memory
#: each) stay few: at V = 4096, 2^31 rows made 13107 chunks of 4 matmuls, each captured in
#: every autotune config (195 s for one profile); at 8, about 25.
META_CLASSES = 8
#: Atol that cross_entropy's error model counts in (its ULP_PER_ATOL is per 1e-5).
CE_ATOL = 1e-5


def reference(x, weight, labels, bias=None, *, ignore_index=ce.DEFAULT_IGNORE_INDEX,
              label_smoothing=0.0, reduction="mean"):
    logits = x @ weight.t()
    if bias is not None:
        logits = logits + bias
    loss, dlogits = ce.reference(logits, labels, ignore_index=ignore_index,
                                 label_smoothing=label_smoothing, reduction=reduction)
    dlogits = dlogits.to(x.dtype)
    out = (loss, dlogits @ weight, dlogits.t() @ x)
    return out + (dlogits.sum(0),) if bias is not None else out


def _dot_roundoff(k: int, u: float) -> float:
    """gamma(K): the relative error, against the sum of the terms' magnitudes, of a
    float32 dot product of K terms (random rounding, or the tensor cores' truncation)."""
    return u * max(SUM_ERROR_C * math.sqrt(max(k, 1)), 2.0 * ULPS_PER_MMA_STEP * k / MMA_DEPTH)


def _finite_abs(t):
    return t.abs().nan_to_num(0.0, 0.0, 0.0)


def _conditioning(x, weight, labels, bias=None, *, dtype, ignore_index=ce.DEFAULT_IGNORE_INDEX,
                  label_smoothing=0.0, reduction="mean"):
    u_s, u_c = storage_roundoff(dtype), compute_roundoff(dtype)
    n_rows, hidden = x.shape
    n_classes = weight.shape[0]
    ax, aw = _finite_abs(x), _finite_abs(weight)
    z = x @ weight.t() + (bias if bias is not None else 0.0)
    terms = ax @ aw.t() + (_finite_abs(bias) if bias is not None else 0.0)
    roundings = 2.0 if bias is not None else 1.0
    dz = _dot_roundoff(hidden, u_c) * terms + roundings * u_s * _finite_abs(z)
    delta = dz.max(-1).values if n_classes and n_rows else dz.new_zeros(n_rows)
    valid = labels != ignore_index
    count = max(1, int(valid.sum()))
    k = 1.0 / count if reduction == "mean" else 1.0
    kwargs = dict(ignore_index=ignore_index, label_smoothing=label_smoothing)
    loss_scale, _ = ce._error_scale(z, labels, reduction=reduction, **kwargs)
    _, grad_scale = ce._error_scale(z, labels, reduction="sum", **kwargs)  # unscaled, k = 1
    spread = torch.where(valid, 2.0 * delta, torch.zeros_like(delta))
    loss = CE_ATOL * loss_scale + (spread if reduction == "none" else k * spread.sum())
    # dlogits (unscaled): the kernel's own error, softmax's response to the logits'
    # error, the rounding to the input dtype
    p = torch.softmax(z, -1).nan_to_num(0.0, 0.0, 0.0)
    _, g = ce.reference(z, labels, reduction="sum", **kwargs)
    g = _finite_abs(g)
    response = torch.minimum(torch.ones_like(p),
                             p * torch.expm1((2.0 * delta).clamp(max=50.0))[:, None])
    big_g = CE_ATOL * grad_scale + response + u_s * g
    big_g = torch.where(valid[:, None], big_g, torch.zeros_like(big_g)).nan_to_num(0.0, 0.0, 0.0)
    # each chunk's product rounded to the input dtype, the mean's scaling once more
    grad_x = k * (big_g @ aw + (_dot_roundoff(n_classes, u_c) + 2.0 * u_s) * (g @ aw))
    over_rows = _dot_roundoff(n_rows, u_c) + 2.0 * u_s
    grad_w = k * (big_g.t() @ ax + over_rows * (g.t() @ ax))
    out = tuple(t.nan_to_num(0.0, 0.0, 0.0) for t in (loss, grad_x, grad_w))
    if bias is None:
        return out
    return out + ((k * (big_g.sum(0) + over_rows * g.sum(0))).nan_to_num(0.0, 0.0, 0.0),)


def _choice(gen, options):
    return options[int(torch.randint(0, len(options), (), generator=gen, device="cpu"))]


def make_args(x, gen):
    n_rows = x.shape[0] if x.dim() else 1
    hidden = x.shape[-1] if x.dim() else 1
    if x.device.type == "meta":  # launches captured at full size: shapes, no values
        return ((x, torch.empty((META_CLASSES, hidden), dtype=x.dtype, device="meta"),
                 torch.empty(n_rows, dtype=torch.int64, device="meta"), None),
                {"ignore_index": ce.DEFAULT_IGNORE_INDEX, "label_smoothing": 0.0,
                 "reduction": "mean"})
    most = max(1, min(MAX_CLASSES, MAX_WEIGHT_NUMEL // max(hidden, 1)))
    n_classes = int(torch.randint(1, most + 1, (), generator=gen, device="cpu"))
    finite = x.detach().double().abs().nan_to_num(0.0, 0.0, 0.0)
    largest = float(finite.max()) if finite.numel() else 0.0
    shrink = min(1.0, LOGIT_SCALE / largest) if largest > 0 else 1.0
    weight = torch.randn((n_classes, hidden), generator=gen, dtype=torch.float64,
                         device="cpu") * (shrink / math.sqrt(max(hidden, 1)))
    bias = None
    if _choice(gen, (False, True)):
        bias = torch.randn(n_classes, generator=gen, dtype=torch.float64, device="cpu")
        bias = bias.to(x.dtype).to(x.device)
    # labels, ignore index, smoothing and reduction: cross_entropy's draws
    logits_like = torch.empty((n_rows, n_classes), dtype=x.dtype)
    (_, labels), options = ce.make_args(logits_like, gen)
    return (x, weight.to(x.dtype).to(x.device), labels.to(x.device), bias), options


FUSED_LINEAR_CROSS_ENTROPY = OpSpec(
    name="fused_linear_cross_entropy",
    description="cross-entropy of the logits x @ weight^T (+ bias) with ignore_index, label "
                "smoothing and a reduction: (loss, grad_x, grad_weight[, grad_bias]), "
                "the logits never held whole (chunked over tokens)",
    reference=reference,
    reference_kernel="kernels.fused_linear_cross_entropy:fused_linear_cross_entropy",
    dtypes=DTYPES,
    make_args=make_args,
    min_ndim=2,
    max_ndim=2,
    conditioning=_conditioning,
    mode_gaps={("interpreter", torch.bfloat16):
               "bf16 tl.dot returns wrong values in Triton's interpreter (the logits and "
               "gradients are matmul outputs)"},
    # tokens x hidden, one shape: every matmul autotune config is compiled for each of
    # the four products (logits, grad_x, grad_weight, grad_bias), V drawn (ragged)
    compile_shapes=((256, 128),),
    # every suite: no relation of suites/relations.py applies (nll_of_log_softmax relates
    # cross_entropy to log_softmax), and gradcheck needs a differentiable launcher
    # (OpSpec.autograd), which this op, returning its own gradients, does not declare
)

OPS = (FUSED_LINEAR_CROSS_ENTROPY,)
