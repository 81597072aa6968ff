"""Cross-entropy over the last dim (the vocabulary), loss and gradient in one call.

The op returns ``(loss, dlogits)``: the loss (float32 whatever the logits' dtype, float64
for float64 logits; per row for reduction "none", else a scalar) and its gradient with
respect to the logits for an upstream gradient of 1, in the logits' dtype: what a
one-pass kernel (Liger-Kernel's) writes while the logits are on chip. The float64
reference is torch's ``F.cross_entropy`` and its autograd gradient.

The drawn tensor is the logits ``[..., V]``. make_args draws the labels in [0, V) with
about one row in eight set to ``ignore_index`` (never the first, so a mean has a row to
average: torch's mean over no rows is NaN, which the empty-tensor check covers), an
ignore index that is -100 or, one time in four, a valid class (rows of that class are
then ignored), label smoothing 0 or 0.1, and the reduction.

Error model (``_error_scale``, atol multiplied per output; both tolerances below are
float32 ulps against an atol of 1e-5, the atol of every 16- and 32-bit dtype here; the
float64 one, far smaller, is scaled alike and stays far above float64 rounding):

- a row's loss: lse - x_y and lse - mean(x) cancel where the logits are large (|x| ~ 1e4
  with a loss ~ 1): the float32 result errs by a few ulp of max|x|; log(s) errs by about
  sqrt(V) ulp (s is a sum of V terms in [0, 1]); the mean of x by sqrt(V) ulp of max|x|.
  Bound: C * u * (2 + sqrt(V)) * (1 + max|x|), C = 4;
- "sum" and "mean": the rows' bounds add up, plus the float32 sum of the n row losses
  (C * u * n * sum|loss|), over the count for "mean";
- dlogits: p_j = exp(x_j - m) / s errs relatively by about (sqrt(V) + |x_j - m|) ulp,
  times k (1 or 1 / count); the one-hot and smoothing terms add a few ulp of k. 16-bit
  gradients are dominated by their own rounding (rtol), float32 ones need the scale at
  V of a few thousand and more.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from triton_cts.ops.spec import OpSpec

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
REDUCTIONS = ("none", "sum", "mean")
DEFAULT_IGNORE_INDEX = -100
SMOOTHINGS = (0.0, 0.1)
#: the constant C of the error model, and the float32 roundoff per unit of atol (1e-5)
SUM_ERROR_C = 4.0
ULP_PER_ATOL = 2.0 ** -24 / 1e-5


def reference(logits, labels, *, ignore_index=DEFAULT_IGNORE_INDEX, label_smoothing=0.0,
              reduction="mean"):
    n_cols = logits.shape[-1]
    x = logits.detach().reshape(-1, n_cols).requires_grad_()
    with torch.enable_grad():
        loss = F.cross_entropy(x, labels.reshape(-1).long(), ignore_index=ignore_index,
                               label_smoothing=label_smoothing, reduction=reduction)
        (grad,) = torch.autograd.grad(loss, x, torch.ones_like(loss))
    # torch's autograd gives NaN in an ignored row whose logits hold a NaN or are all
    # -inf (0 * NaN in log_softmax's backward); the loss does not depend on an ignored
    # row, so its gradient is 0
    ignored = (labels.reshape(-1) == ignore_index)[:, None]
    grad = torch.where(ignored, torch.zeros_like(grad), grad)
    loss = loss.detach().reshape(labels.shape) if reduction == "none" else loss.detach()
    if logits.dtype != torch.float64:  # the torch oracle: a float32 loss, as specified
        loss = loss.float()
    return loss, grad.reshape(logits.shape)


def _row_stats(logits, labels, ignore_index):
    n_cols = logits.shape[-1]
    x = logits.reshape(-1, n_cols)
    finite = x.abs().nan_to_num(0.0, 0.0, 0.0)
    magnitude = finite.max(-1).values if x.shape[0] else finite.new_zeros(0)
    valid = labels.reshape(-1) != ignore_index
    return x, magnitude, valid


def _error_scale(logits, labels, *, ignore_index=DEFAULT_IGNORE_INDEX, label_smoothing=0.0,
                 reduction="mean"):
    n_cols = logits.shape[-1]
    x, magnitude, valid = _row_stats(logits, labels, ignore_index)
    root = math.sqrt(n_cols)
    row_bound = SUM_ERROR_C * ULP_PER_ATOL * (2.0 + root) * (1.0 + magnitude)
    row_bound = torch.where(valid, row_bound, torch.zeros_like(row_bound))
    count = max(1, int(valid.sum()))
    k = 1.0 / count if reduction == "mean" else 1.0
    if reduction == "none":
        loss_scale = 1.0 + row_bound.reshape(labels.shape)
    else:
        rows_loss, _ = reference(logits, labels, ignore_index=ignore_index,
                                 label_smoothing=label_smoothing, reduction="none")
        total = rows_loss.abs().nan_to_num(0.0, 0.0, 0.0).sum()
        summed = row_bound.sum() + SUM_ERROR_C * ULP_PER_ATOL * x.shape[0] * total
        loss_scale = 1.0 + k * summed
    p = torch.softmax(x, -1).nan_to_num(0.0, 0.0, 0.0)
    shift = (x - x.max(-1, keepdim=True).values).abs().nan_to_num(0.0, 0.0, 0.0) \
        if x.numel() else x
    grad_scale = 1.0 + SUM_ERROR_C * ULP_PER_ATOL * k * ((root + shift) * p + 1.0)
    return loss_scale, grad_scale.reshape(logits.shape)


def make_args(x, gen):
    shape = x.shape[:-1]
    if x.device.type == "meta":  # launches captured at full size: shapes, no values
        return ((x, torch.empty(shape, dtype=torch.int64, device="meta")),
                {"ignore_index": DEFAULT_IGNORE_INDEX, "label_smoothing": 0.0,
                 "reduction": "mean"})
    n_cols = max(x.shape[-1], 1) if x.dim() else 1
    labels = torch.randint(0, n_cols, shape, generator=gen, device="cpu")
    ignore_index = DEFAULT_IGNORE_INDEX
    if int(torch.randint(0, 4, (), generator=gen, device="cpu")) == 0:
        ignore_index = int(torch.randint(0, n_cols, (), generator=gen, device="cpu"))
    ignored = torch.randint(0, 8, shape, generator=gen, device="cpu") == 0
    labels = torch.where(ignored, ignore_index, labels)
    flat = labels.reshape(-1)
    if flat.numel() and int(flat[0]) == ignore_index:  # keep one row to average over
        flat[0] = (ignore_index + 1) % n_cols if ignore_index >= 0 else 0
    smoothing = SMOOTHINGS[int(torch.randint(0, len(SMOOTHINGS), (), generator=gen,
                                             device="cpu"))]
    reduction = REDUCTIONS[int(torch.randint(0, len(REDUCTIONS), (), generator=gen,
                                             device="cpu"))]
    return ((x, labels.to(x.device)),
            {"ignore_index": ignore_index, "label_smoothing": smoothing,
             "reduction": reduction})


CROSS_ENTROPY = OpSpec(
    name="cross_entropy",
    description="cross-entropy over the last dim with ignore_index, label smoothing and a "
                "reduction: (loss, dlogits), the gradient written in the same pass",
    reference=reference,
    reference_kernel="kernels.cross_entropy:cross_entropy",
    autograd="kernels.cross_entropy:cross_entropy_autograd",
    dtypes=FLOATS,
    make_args=make_args,
    min_ndim=2,
    max_ndim=3,
    error_scale=_error_scale,
    # a Llama-3 vocabulary (tiled), one that fits a fused block, and short rows
    compile_shapes=((16, 128256), (256, 4096), (512, 100)),
    relations=("nll_of_log_softmax",),
    variants={"tiled": "kernels.cross_entropy:cross_entropy_tiled"},
    deterministic=("reference", "reference/tiled"),
)

OPS = (CROSS_ENTROPY,)
