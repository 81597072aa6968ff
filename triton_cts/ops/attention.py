"""Scaled dot-product attention (FlashAttention-2 style kernels): forward and backward.

The drawn tensor x is q, transposed: x is (batch, heads, head dim, query length), so the
query length is the dim the suites' shapes give most of their budget (several query
blocks, long and ragged lengths, in interpreter mode too) and q = x.transpose(-1, -2) is
a non-contiguous view (where one head is drawn, batch and heads trade places). make_args
draws the rest from the case's generator: key/value heads (a divisor of the query heads:
grouped-query attention), the key length (the query length, or another one), causal or
not, the causal offset (torch's top-left alignment, FlashAttention's bottom-right, or
one that leaves some queries seeing no key) and the softmax scale. k and v are views of
one packed (B, Sk, 2, H_kv, D) tensor, so their strides are not q's.
"""
import math

import torch

from triton_cts.ops.spec import OpSpec, randn

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
#: The largest head dim the kernels take: FlashAttention-2's limit (its tiles of BLOCK x
#: 256 fill shared memory on every target). A drawn q with a longer head dim is cut to
#: its first MAX_HEAD_DIM columns (a strided view).
MAX_HEAD_DIM = 256
F = torch.nn.functional


def _draw(gen, low: int, high: int) -> int:
    """An int in [low, high]."""
    # on the CPU whatever the default device: make_args also runs under torch.device("meta")
    return int(torch.randint(low, high + 1, (1,), generator=gen, device="cpu"))


#: Scores (batch x heads x query length x key length) a draw may reach, or as many as the
#: drawn elements if more: the interpreter's cost grows with query blocks x key blocks,
#: and the float64 reference and error models hold the scores in memory (device mode's
#: boundary shapes have 2^27 elements).
SCORES_BUDGET = 8192


def _divisors(n: int) -> list[int]:
    """The divisors of n >= 1, ascending, in O(sqrt(n)) (grid-limit captures draw up to
    2^31 heads)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _options(gen, heads: int, sq: int, numel: int, rows: int):
    """(key/value heads, key length, keyword options), drawn. The key length is up to
    2 Sq + 8 and within the scores budget for ``rows`` (B x H x Sq) query rows."""
    divisors = _divisors(heads)
    h_kv = divisors[_draw(gen, 0, len(divisors) - 1)]
    max_keys = max(1, min(2 * sq + 8, max(SCORES_BUDGET, numel) // max(rows, 1)))
    sk = sq if _draw(gen, 0, 1) and 1 <= sq <= max_keys else _draw(gen, 1, max_keys)
    # a fair coin, mixed with the query length's parity so that the compile suite's
    # shapes (all built from one generator seed) reach both
    kwargs = {"causal": bool(_draw(gen, 0, 1) ^ (sq & 1))}
    if kwargs["causal"]:
        # 0: torch's is_causal; sk - sq: bottom-right; else anywhere from "the first
        # queries see no key" to "every query sees every key"
        choice = _draw(gen, 0, 2)
        kwargs["causal_offset"] = (0, sk - sq, _draw(gen, -sq, sk))[choice]
    if _draw(gen, 0, 1):
        kwargs["scale"] = _draw(gen, 1, 64) / 32.0  # exact in every dtype
    return h_kv, sk, kwargs


def _kv(x: torch.Tensor, gen, h_kv: int, sk: int):
    """k and v: the two halves of one packed (B, Sk, 2, H_kv, D) tensor, made in float64
    and rounded to x's dtype (on a meta x, for compile-mode captures, meta tensors)."""
    shape = (x.shape[0], sk, 2, h_kv, x.shape[-1])
    kv = randn(shape, gen, x.dtype, x.device, drawn_in=torch.float64)
    return kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)


def _make_args(x: torch.Tensor, gen: torch.Generator):
    q = x.transpose(-1, -2)[..., :MAX_HEAD_DIM]
    if q.shape[1] == 1:  # one head drawn: batch and heads trade places (a view), so that
        q = q.transpose(0, 1)  # more draws have several heads to group
    b, h, sq, d = q.shape
    h_kv, sk, kwargs = _options(gen, max(h, 1), sq, x.numel(), b * h * sq)
    k, v = _kv(q, gen, h_kv if h else 0, sk)
    return (q, k, v), kwargs


def _make_backward_args(x: torch.Tensor, gen: torch.Generator):
    """(q, k, v, do). q's non-finite values become 0 (in place, keeping its layout): a NaN
    in a query poisons every gradient through the masked scores in torch (0 * NaN) but
    only through the visible ones in a kernel that skips masked blocks, so gradients of
    non-finite inputs have no single right answer."""
    if x.device.type != "meta":
        x.masked_fill_(~torch.isfinite(x), 0.0)
    (q, k, v), kwargs = _make_args(x, gen)
    do = randn(q.shape, gen, q.dtype, q.device, drawn_in=torch.float64)
    return (q, k, v, do), kwargs


def _mask(q, k, causal: bool, causal_offset: int):
    """[Sq, Sk] boolean mask of the keys each query sees, None without causal."""
    if not causal:
        return None
    return torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool,
                      device=q.device).tril(diagonal=causal_offset)


def reference(q, k, v, causal: bool = False, scale: float | None = None,
              causal_offset: int = 0):
    """softmax(scale * q @ k^T, the causal mask) @ v, written out (grouped-query heads
    repeated). A query whose visible scores are all -inf (it sees no key, or a -inf query
    scored -inf against each key) gets 0 and passes no gradient: torch 2.13's
    scaled_dot_product_attention gives 0 on the CPU, masked or not, FlashAttention-style
    kernels give 0, but torch 2.11's CUDA math path gave NaN under a mask, so the
    convention is fixed here rather than taken from whichever torch runs the suite."""
    if k.shape[-2] == 0:
        return torch.zeros_like(q)
    group = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(group, -3), v.repeat_interleave(group, -3)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    s = (q @ k.transpose(-2, -1)) * scale
    mask = _mask(q, k, causal, causal_offset)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    empty = (s == float("-inf")).all(-1, keepdim=True)
    p = torch.softmax(s.masked_fill(empty, 0.0), -1).masked_fill(empty, 0.0)
    return p @ v


def reference_backward(q, k, v, do, causal: bool = False, scale: float | None = None,
                       causal_offset: int = 0):
    """(dq, dk, dv) of :func:`reference` by torch autograd."""
    inputs = tuple(t.detach().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        o = reference(*inputs, causal, scale, causal_offset)
        if not o.requires_grad:  # no key: nothing flows
            return tuple(torch.zeros_like(t) for t in inputs)
        return torch.autograd.grad(o, inputs, do)


# ---- the error model ------------------------------------------------------------------
# A kernel computes the scores s = scale * q.k in float32 from inputs in the dtype, the
# probabilities p = exp(s - lse) in float32, rounds p to the dtype for the p @ v dot and
# accumulates in float32; the backward also rounds ds = p * (dp - delta) to the dtype, and
# delta = rowsum(do * o) is taken from the rounded o. Two kinds of error follow:
# - roundings of p, ds, delta and o to the dtype (unit roundoff u): each costs u times the
#   terms of the sum it enters, so atol is u-sized and multiplied per element by those
#   terms (error_scale): p @ |v| for o; scale * T @ |k| and scale * T^T @ |q| for dq and
#   dk, with T = p * (|dp| + |delta| + rowsum|do * o|); p^T @ |do| for dv;
# - the float32 score error ds_ij <= (D + 2) * 2^-24 * scale * (|q| @ |k|^T)_ij (the dot's
#   accumulation and exp2's argument), which moves p by p * ds: negligible for unit-size
#   inputs, but with inputs of 1e3..1e4 (large-offset, wide-range values) scores of 1e6
#   move by more than 1 and any correct kernel errs visibly. That is the conditioning.
#: atol in units of the dtype's unit roundoff: the forward rounds p once and o once, the
#: backward rounds p, ds and delta (o) in sequence.
FORWARD_ROUNDINGS = 2.0
BACKWARD_ROUNDINGS = 4.0
#: float32 unit roundoff of the score accumulation (tensor-core accumulators may lose a
#: bit per step: counted once per term, so D terms cost D * 2^-24 relative to sum |q k|).
SCORE_ROUNDOFF = 2.0 ** -24


def _tolerances(roundings: float):
    """(rtol, atol): torch's rtol per dtype; atol ``roundings`` unit roundoffs (before the
    error scale)."""
    return {
        torch.float16: (1e-3, roundings * 2.0 ** -11),
        torch.bfloat16: (1.6e-2, roundings * 2.0 ** -8),
        torch.float32: (1.3e-6, max(1e-5, roundings * 2.0 ** -24)),
    }


def _expanded(q, k, v):
    """k and v repeated to q's heads (grouped-query attention)."""
    group = q.shape[1] // max(k.shape[1], 1)
    return k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)


def _weights(q, k, causal, scale, causal_offset):
    """(p, score error) in float64: the attention probabilities (0 where masked or for a
    query that sees no key) and the float32 score error bound per (query, key)."""
    scale = 1.0 / math.sqrt(max(q.shape[-1], 1)) if scale is None else scale
    s = scale * q @ k.transpose(-1, -2)
    mask = _mask(q, k, causal, causal_offset)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0, 0.0, 0.0)
    if mask is not None:
        p = p.masked_fill(~mask.any(-1)[:, None], 0.0)
    ds = (q.shape[-1] + 2) * SCORE_ROUNDOFF * scale * (q.abs() @ k.abs().transpose(-1, -2))
    return p, ds.nan_to_num(0.0, 0.0, 0.0), scale


def _error_scale(q, k, v, causal=False, scale=None, causal_offset=0):
    k, v = _expanded(q, k, v)
    p, _, _ = _weights(q, k, causal, scale, causal_offset)
    return ((p @ v.abs()).nan_to_num(0.0, 0.0, 0.0).clamp(min=1.0),)


def _conditioning(q, k, v, causal=False, scale=None, causal_offset=0, *, dtype):
    """First order: o moves by sum_j p_j (ds_j - sum_k p_k ds_k) v_j, at most
    2 * max_j ds_j * (p @ |v|)."""
    k, v = _expanded(q, k, v)
    p, ds, _ = _weights(q, k, causal, scale, causal_offset)
    worst = (p * ds).amax(-1, keepdim=True)
    return ((2 * worst * (p @ v.abs())).nan_to_num(0.0, 0.0, 0.0),)


def _backward_terms(q, k, v, do, causal, scale, causal_offset):
    k_x, v_x = _expanded(q, k, v)
    p, ds, scale = _weights(q, k_x, causal, scale, causal_offset)
    o = p @ v_x
    dp = do @ v_x.transpose(-1, -2)
    delta = (do * o).sum(-1, keepdim=True)
    size = dp.abs() + delta.abs() + (do * o).abs().sum(-1, keepdim=True)
    return k_x, p, ds, scale, size


def _per_kv_head(t, k):
    """Sums over the query heads that share a key/value head: [B, H, ...] -> [B, H_kv, ...]."""
    b, h = t.shape[:2]
    return t.reshape(b, k.shape[1], h // max(k.shape[1], 1), *t.shape[2:]).sum(2)


def _backward_error_scale(q, k, v, do, causal=False, scale=None, causal_offset=0):
    k_x, p, _, scale, size = _backward_terms(q, k, v, do, causal, scale, causal_offset)
    t = p * size
    out = (scale * t @ k_x.abs(),
           _per_kv_head(scale * t.transpose(-1, -2) @ q.abs(), k),
           _per_kv_head(p.transpose(-1, -2) @ do.abs(), k))
    return tuple(x.nan_to_num(0.0, 0.0, 0.0).clamp(min=1.0) for x in out)


def _backward_conditioning(q, k, v, do, causal=False, scale=None, causal_offset=0, *,
                           dtype):
    """p moves by up to 2 * p * max ds per row (see _conditioning); dq, dk and dv move with
    it through ds = p * (dp - delta) and p^T @ do."""
    k_x, p, ds, scale, size = _backward_terms(q, k, v, do, causal, scale, causal_offset)
    moved = 2 * p * (p * ds).amax(-1, keepdim=True)
    t = moved * size
    out = (scale * t @ k_x.abs(),
           _per_kv_head(scale * t.transpose(-1, -2) @ q.abs(), k),
           _per_kv_head(moved.transpose(-1, -2) @ do.abs(), k))
    return tuple(x.nan_to_num(0.0, 0.0, 0.0) for x in out)


_GAPS = {("interpreter", torch.bfloat16): "bf16 tl.dot returns wrong values in Triton's "
                                          "interpreter"}
#: Drawn x, (batch, heads, head dim, query length): head dim 128 at 512 queries (each
#: profile's first tile that fits: its shared memory / LDS / UB against the limit), and a
#: head dim that is not a power of two (96, padded to 128) with a ragged length; one is
#: causal, the other not (see _options).
_COMPILE_SHAPES = ((1, 4, 128, 512), (2, 3, 96, 77))

ATTENTION = OpSpec(
    name="attention",
    description="scaled dot-product attention softmax(scale q k^T [causal]) v, FlashAttention-2 "
                "style; grouped-query heads, causal offsets, ragged lengths, head dims to 256",
    reference=reference,
    reference_kernel="kernels.attention:attention",
    autograd="kernels.attention:attention_autograd",
    dtypes=DTYPES,
    make_args=_make_args,
    min_ndim=4,
    max_ndim=4,
    tolerances=_tolerances(FORWARD_ROUNDINGS),
    error_scale=_error_scale,
    conditioning=_conditioning,
    mode_gaps=_GAPS,
    compile_shapes=_COMPILE_SHAPES,
    relations=("key_value_permutation_invariance",),
)

ATTENTION_BACKWARD = OpSpec(
    name="attention_backward",
    description="scaled dot-product attention, backward: (dq, dk, dv) for the output "
                "gradient do (the forward kernel's o and log-sum-exp, then delta, dk/dv and "
                "dq kernels)",
    reference=reference_backward,
    reference_kernel="kernels.attention:attention_backward",
    dtypes=DTYPES,
    make_args=_make_backward_args,
    min_ndim=4,
    max_ndim=4,
    tolerances=_tolerances(BACKWARD_ROUNDINGS),
    error_scale=_backward_error_scale,
    conditioning=_backward_conditioning,
    mode_gaps=_GAPS,
    compile_shapes=_COMPILE_SHAPES,
)

OPS = (ATTENTION, ATTENTION_BACKWARD)
