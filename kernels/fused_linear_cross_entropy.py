"""Fused linear + cross-entropy: the loss of cross_entropy(x @ weight^T + bias, labels) and
its gradients, without ever holding the whole [tokens, V] logits.

The last layer of a language model maps hidden states x [T, H] to logits [T, V] with V
up to 256k: in bfloat16 at T = 8192 and V = 128256 the logits alone take 2 GiB, and
their gradient as much again. As in Liger-Kernel's fused_linear_cross_entropy (after
mgmalek/efficient_cross_entropy), the tokens are processed in chunks of rows, and per
chunk only that chunk's logits exist:

    logits_c  = x_c @ weight^T (+ bias)                      our matmul
    loss_c, dlogits_c = cross_entropy(logits_c, labels_c)    our one-pass kernel
    grad_x_c  = dlogits_c @ weight                           our matmul
    grad_w   += dlogits_c^T @ x_c                            our matmul, summed in float32
    grad_b   += ones @ dlogits_c                             our matmul, summed in float32

The gradients are those of the loss for an upstream gradient of 1 (the sum of the rows'
losses for "none"), computed in the forward, as our cross_entropy launcher does for the
logits. "mean" divides by the rows not ignored in the WHOLE batch, counted first: each
chunk's cross-entropy runs with the unscaled ("sum") gradient, and the loss and the
gradients are divided by the count once at the end (a per-chunk mean would weight the
chunks' rows unequally). Where all the tokens are one chunk, the cross-entropy takes the
reduction itself and its gradient comes scaled (float16 means excepted: see
:func:`fused_linear_cross_entropy`), so nothing follows the products.

Chunk size: rows whose logits and the gradient written beside them (2 x rows x V in the
input dtype) take about as many bytes as x does (Liger's rule: the transient memory of
the loss is that of its input), but at least the bytes every compute unit's block holds
at once (``launch.max_fused_size_bytes`` x ``limits.compute_units``: 8.6 MB on an H100,
below which a chunk's kernels cannot fill the device; x of 8192 x 4096 bfloat16 is 64
MiB), and no fewer rows than make a chunk's fixed traffic at most 1 / FIXED_TRAFFIC_SHARE
of its products' time: each chunk reads the whole [V, H] weight twice and reads and
writes the float32 sum of the weight gradient once (2 x size + 8 bytes an element), for
6 x rows flops an element (three products), at the profile's ``peak.dense_tflops`` and
``peak.memory_bandwidth_gbs`` (:func:`amortizing_rows`; x's size alone gives far fewer
rows for the Llama-3 head, which were slow: benchmarks/results/h200.jsonl, experiment
"comments"); never more than 1 / DEVICE_MEMORY_SHARE of the
profile's device memory (``limits.device_memory_bytes``), so a huge x does not make a
chunk that fills the device. Where the whole batch as one chunk holds no more memory than
the chunks together with the float32 sum they need (4 x V x H bytes: the weight
gradient of one chunk is the product itself), the batch is one chunk. The suites'
derived profiles (tiny blocks, few units) give many chunks on small inputs, and so does
a profile derived with a small device memory (the tests).

The logits are the matmul's output in the input dtype (as torch's linear gives them);
the float32 loss is summed in a fixed order. Precision: float32 dots are IEEE
("ieee"), not tf32, so the float32 loss is a float32 one.
"""
from __future__ import annotations

import math

import torch

from .cross_entropy import cross_entropy
from .fast_launch import PassedChecks, signature
from .matmul import matmul
from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               WrongDeviceError, check_inputs)
from triton_cts.profiles import Profile, next_power_of_2

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
LABEL_DTYPES = (torch.int32, torch.int64)
REDUCTIONS = ("none", "sum", "mean")
OP = "fused_linear_cross_entropy"

#: A chunk's logits and their gradient take at most this share of the device's memory
#: (limits.device_memory_bytes): activations, the weight and its float32 gradient sum
#: need the rest.
DEVICE_MEMORY_SHARE = 16


def chunk_rows(profile: Profile, n_rows: int, n_classes: int, hidden: int,
               dtype: torch.dtype) -> int:
    """Rows per chunk: a chunk's logits and their gradient (2 x rows x V elements of
    ``dtype``) about as large as x (rows x hidden), but no smaller than the blocks all
    compute units hold at once (MAX_FUSED_SIZE bytes each: a smaller chunk leaves the
    device idle and multiplies the launches) nor than :func:`amortizing_rows`, at most
    1 / DEVICE_MEMORY_SHARE of the profile's device memory, and at least one row; all the
    rows where one chunk holds no more than the chunks and their float32 sum would."""
    size = dtype.itemsize
    on_chip = profile["launch.max_fused_size_bytes"] * profile.compute_units
    per_row = max(1, 2 * n_classes * size)
    wanted = max(n_rows * hidden * size, on_chip, amortizing_rows(profile, dtype) * per_row)
    budget = profile["limits.device_memory_bytes"] // DEVICE_MEMORY_SHARE
    rows = max(1, min(min(wanted, budget) // per_row, n_rows))
    if n_rows * per_row <= min(budget, rows * per_row + 4 * n_classes * hidden):
        return max(1, n_rows)
    return rows


#: Most share of a chunk's products' time its fixed traffic may take at peak
#: measured: benchmarks/results/h200.jsonl, experiment "comments"
FIXED_TRAFFIC_SHARE = 8


def amortizing_rows(profile: Profile, dtype: torch.dtype) -> int:
    """The fewest rows (a power of two) whose chunk spends at most 1 / FIXED_TRAFFIC_SHARE
    of its products' time on its fixed traffic: 6 x rows flops for each [V, H] weight
    element against 2 x size + 8 bytes of it, at the profile's peak flops and bandwidth.
    1 where the profile gives no peak for the dtype's dots (float32 dots here are IEEE:
    the "float32" peak, not tf32's)."""
    tflops = profile["peak.dense_tflops"].get(str(dtype).removeprefix("torch."))
    if not tflops:
        return 1
    fixed_bytes = 2 * dtype.itemsize + 8
    rows = (FIXED_TRAFFIC_SHARE * tflops * 1e12 * fixed_bytes
            / (6 * profile.peak_bandwidth_gbs() * 1e9))
    return next_power_of_2(max(1, math.ceil(rows)))


def _check(x, weight, labels, bias, reduction, profile) -> int:
    """Every check but label_smoothing's (a float: checked on every call), raising on the
    first that fails; the rows of a chunk (:func:`chunk_rows`)."""
    check_inputs(OP, profile, DTYPES, x=x, weight=weight, bias=bias)
    if not isinstance(labels, torch.Tensor) or labels.dtype not in LABEL_DTYPES:
        raise UnsupportedDtypeError(f"{OP}: labels must be an int32 or int64 tensor, got "
                                    f"{getattr(labels, 'dtype', type(labels).__name__)}")
    check_inputs(OP, profile, LABEL_DTYPES, labels=labels)
    if labels.device != x.device:
        raise WrongDeviceError(f"{OP}: x on {x.device}, labels on {labels.device}")
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        raise UnsupportedDtypeError(
            f"{OP}: x, weight and bias must have one dtype, got x {x.dtype}, weight "
            f"{weight.dtype}" + (f", bias {bias.dtype}" if bias is not None else ""))
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ShapeMismatchError(f"{OP}: need x [tokens, hidden] and weight [V, hidden], got "
                                 f"x={tuple(x.shape)}, weight={tuple(weight.shape)}")
    if labels.shape != x.shape[:1]:
        raise ShapeMismatchError(f"{OP}: labels must have one label per token, shape "
                                 f"({x.shape[0]},), got {tuple(labels.shape)}")
    if bias is not None and bias.shape != weight.shape[:1]:
        raise ShapeMismatchError(f"{OP}: bias must have one value per class, shape "
                                 f"({weight.shape[0]},), got {tuple(bias.shape)}")
    if weight.shape[0] == 0:  # torch raises too (every label is out of bounds)
        raise ValueError(f"{OP}: weight has no classes (V = 0)")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{OP}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    return chunk_rows(profile, x.shape[0], weight.shape[0], x.shape[1], x.dtype)


#: The inputs that passed :func:`_check` on a GPU, with their chunk's rows
_CHECKS = PassedChecks()


def fused_linear_cross_entropy(x: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor,
                               bias: torch.Tensor | None = None, *, ignore_index: int = -100,
                               label_smoothing: float = 0.0, reduction: str = "mean",
                               profile: Profile) -> tuple[torch.Tensor, ...]:
    """``(loss, grad_x, grad_weight[, grad_bias])`` of cross_entropy(x @ weight^T + bias,
    labels) for x [T, H], weight [V, H], labels [T] and bias [V] (grad_bias only where a
    bias is given): the loss (float32; per token for "none", else a scalar) and the
    gradients for an upstream gradient of 1, each in its input's dtype. ``bias`` may be
    passed by position (the op's arguments: x, weight, labels, bias or None)."""
    rows = _CHECKS.checked(profile, (reduction, signature(x, weight, labels, bias)), x,
                           _check, x, weight, labels, bias, reduction, profile)
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"{OP}: label_smoothing must be in [0, 1], got {label_smoothing}")
    n_rows, hidden = x.shape
    n_classes = weight.shape[0]
    device = x.device
    y = labels.contiguous()
    weight_t = weight.t()  # [H, V], a strided view: matmul takes strides
    ones = torch.ones((1, rows), dtype=x.dtype, device=device) if bias is not None else None
    if 0 < n_rows <= rows and (reduction != "mean" or x.dtype != torch.float16):
        # one chunk: the cross-entropy reduces the loss and scales the gradient itself
        # (one launch where the profile takes it), and the products are the whole
        # gradients, in x's dtype: no torch operation follows (a dozen launches a call at
        # a few tokens). float16's mean keeps the float32 scaling below: a probability
        # of 1/V over the count rounds to 0 in float16 (1/128256 over 8192 rows: 1e-9)
        out = _chunk(x, weight, weight_t, bias, y, ones, ignore_index, label_smoothing,
                     profile, reduction)
        return out if bias is not None else out[:3]
    # chunks: the chunks' weight and bias gradients summed in float32 as the products
    # make them (the first chunk's written, the others' added in the product's own
    # epilogue: no [V, H] product of a chunk is stored apart and added after)
    losses = torch.empty(n_rows, dtype=torch.float32, device=device)
    grad_x = torch.empty_like(x, memory_format=torch.contiguous_format)
    grad_w = torch.empty((n_classes, hidden), dtype=torch.float32, device=device)
    grad_b = torch.empty(n_classes, dtype=torch.float32, device=device) \
        if bias is not None else None
    if n_rows == 0:  # no chunk writes them
        grad_x.zero_()
        grad_w.zero_()
        if grad_b is not None:
            grad_b.zero_()
    for start in range(0, n_rows, rows):
        stop = min(start + rows, n_rows)
        losses[start:stop] = _chunk(x[start:stop], weight, weight_t, bias, y[start:stop],
                                    ones, ignore_index, label_smoothing, profile,
                                    into=(grad_x[start:stop], grad_w, grad_b),
                                    accumulate=start > 0)[0]
    if reduction == "none":
        loss = losses
    else:
        loss = losses.sum()  # float32, one order: deterministic
        if reduction == "mean":
            # rows not ignored in the whole batch; none (or no rows): 0/0 = NaN, as torch
            count = (y != ignore_index).sum().to(torch.float32)
            loss = loss / count
            # the gradient of the mean of nothing is 0, as torch's (not 0 * inf = NaN):
            # every row ignored leaves the gradients 0, so any finite scale keeps them so
            inv = 1.0 / count.clamp(min=1.0)
            # in float32: a 16-bit tensor times a 0-d float32 tensor on a CUDA device
            # rounds the factor to 16 bits first (up to 2^-9 of every gradient, one way)
            grad_x = grad_x.mul_(inv) if grad_x.dtype == torch.float32 else \
                (grad_x.float() * inv).to(x.dtype)
            grad_w *= inv
            if grad_b is not None:
                grad_b *= inv
    out = (loss, grad_x, grad_w.to(weight.dtype))
    return out + (grad_b.to(bias.dtype),) if bias is not None else out


def _chunk(x_c, weight, weight_t, bias, y_c, ones, ignore_index, label_smoothing,
           profile: Profile, reduction: str = "none", into: tuple | None = None,
           accumulate: bool = False) -> tuple:
    """A chunk's (loss, grad_x, grad_weight, grad_bias or None), the loss and the
    gradients as the cross-entropy's ``reduction`` gives them: per-row losses and
    unscaled gradients for "none" (k = 1, "sum"'s), what a chunk of several takes, since
    the batch-wide count scales them at the end. The gradients are new tensors in x's
    dtype, or with ``into`` (grad_x's rows, the float32 weight and bias gradients or
    None) written there, the weight and bias ones added to what they hold where
    ``accumulate``."""
    grad_x, grad_w, grad_b = into if into is not None else (None, None, None)
    logits = matmul(x_c, weight_t, profile=profile, input_precision="ieee")
    if bias is not None:
        logits += bias  # in place: no second [chunk, V] buffer
    losses, dlogits = cross_entropy(logits, y_c, ignore_index=ignore_index,
                                    label_smoothing=label_smoothing, reduction=reduction,
                                    profile=profile)
    del logits
    grad_x = matmul(dlogits, weight, profile=profile, input_precision="ieee", out=grad_x)
    grad_w = matmul(dlogits.t(), x_c, profile=profile, input_precision="ieee", out=grad_w,
                    accumulate=accumulate)
    if bias is not None:
        grad_b = matmul(ones[:, :x_c.shape[0]], dlogits, profile=profile,
                        input_precision="ieee", accumulate=accumulate,
                        out=None if grad_b is None else grad_b[None])[0]
    return losses, grad_x, grad_w, grad_b
