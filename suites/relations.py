"""Metamorphic relations: properties tying an op's outputs on related inputs together.

They catch bugs that a comparison with the reference hides at small sizes or for
well-behaved data: a layer norm that does not centre before squaring passes on N(0, 1)
rows but breaks when the same rows are shifted by a large constant; a log_softmax that
disagrees with its own softmax; gradients that do not sum to zero over a row.

Each relation is a function ``check(run, tol, args, kwargs, allow) -> [Comparison]``.
``run(args, kwargs, op=None)`` runs the implementation under test (or, with ``op``, the
same family's implementation of another op) and returns its outputs as a tuple;
``tol(dtype)`` is the (rtol, atol) the comparison will apply; ``allow(args, kwargs)`` is
the op's conditioning allowance at those inputs (``OpSpec.conditioning``: per output, the
error a correct implementation may make there; None for most ops). A relation transforms
inputs only in ways that are exact in the input dtype (shifts with Sterbenz-exact
subtraction, scaling by powers of two, permutations), so any difference comes from the
implementation. Ops list the relations that hold for them in ``OpSpec.relations``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class Comparison:
    """``outputs`` must match ``expected`` (None entries are not compared) within the op's
    tolerance times ``scale``; ``error_scales`` multiplies atol per output."""

    against: str
    outputs: tuple
    expected: tuple
    scale: float = 2.0  # both sides carry the implementation's rounding
    error_scales: tuple | None = None
    tolerance_dtype: torch.dtype | None = None  # for quantities derived in float64
    allowances: tuple | None = None  # per output, added to atol (the op's conditioning)


@dataclass(frozen=True)
class Relation:
    name: str
    description: str
    kinds: tuple[str, ...]  # value kinds (suites/strategies.py) the relation holds for
    check: Callable[..., list[Comparison]]


def _only_first(outputs: tuple, expected) -> tuple:
    """Compare output 0 only (the others, like mean or indices, change with the input)."""
    return (expected,) + (None,) * (len(outputs) - 1)


def _sum_allowances(*allowances):
    """Elementwise sum of per-output allowance tuples (None entries and Nones skipped)."""
    present = [a for a in allowances if a is not None]
    if not present:
        return None
    return tuple(None if all(p[i] is None for p in present)
                 else sum(p[i] for p in present if p[i] is not None)
                 for i in range(len(present[0])))


def _shift_constant(dtype: torch.dtype) -> float:
    """A power of two large enough that E[x^2] - E[x]^2 cancels catastrophically in the
    compute precision, small enough that x + c keeps half the dtype's mantissa."""
    mantissa_bits = -math.log2(torch.finfo(dtype).eps)
    return 2.0 ** (int(mantissa_bits) // 2 + 1)


def shift_invariance(run, tol, args, kwargs, allow):
    """f(x + c) == f(x) for normalisations over the reduced dim. The pair is made exact:
    x1 = round(x + c), then x0 = x1 - c, which Sterbenz's lemma makes exact because
    c/2 <= x1 <= 2c."""
    x = args[0]
    c = _shift_constant(x.dtype)
    x1 = (x.double().clamp(-c / 4, c / 4) + c).to(x.dtype)
    x0 = (x1.double() - c).to(x.dtype)
    base = run((x0, *args[1:]), kwargs)
    shifted = run((x1, *args[1:]), kwargs)
    # both sides are the implementation's: each may sit its allowance from the truth
    return [Comparison(f"f(x) for x shifted by -{c:g}", shifted, _only_first(shifted, base[0]),
                       allowances=_sum_allowances(allow((x1, *args[1:]), kwargs),
                                                  allow((x0, *args[1:]), kwargs)))]


def scale_invariance(run, tol, args, kwargs, allow):
    """f(a x, eps a^2) == f(x, eps) for layer/RMS norm, with a a power of two (exact)."""
    x, a = args[0], 4.0
    scaled_kwargs = dict(kwargs)
    if "eps" in kwargs:
        scaled_kwargs["eps"] = kwargs["eps"] * a * a
    base = run(args, kwargs)
    scaled_args = ((x.double() * a).to(x.dtype), *args[1:])
    scaled = run(scaled_args, scaled_kwargs)
    return [Comparison(f"f(x) for x scaled by {a:g}", scaled, _only_first(scaled, base[0]),
                       allowances=_sum_allowances(allow(scaled_args, scaled_kwargs),
                                                  allow(args, kwargs)))]


def permutation_invariance(run, tol, args, kwargs, allow):
    """A reduction over every element does not depend on their order."""
    x = args[0]
    gen = torch.Generator().manual_seed(x.numel())
    perm = torch.randperm(x.numel(), generator=gen)
    permuted = x.reshape(-1)[perm].reshape(x.shape)
    base = run(args, kwargs)
    other = run((permuted, *args[1:]), kwargs)
    return [Comparison("f(x) on the elements in another order", other, tuple(base))]


def log_of_softmax(run, tol, args, kwargs, allow):
    """log_softmax(x) == log(softmax(x)). The softmax's relative rounding error becomes an
    absolute error after the log, so atol is raised to the dtype's rtol."""
    log_y = run(args, kwargs)
    y = run(args, kwargs, op="softmax")
    expected = torch.log(y[0].double())
    rtol, atol = tol(log_y[0].dtype)
    return [Comparison("log(softmax(x))", log_y, (expected,),
                       error_scales=(1.0 + 2.0 * rtol / atol,))]


def gradient_rows_sum_to_zero(run, tol, args, kwargs, allow):
    """dx of a normalisation over the last dim sums to zero over each row (layer norm:
    the gradient is orthogonal to shifts of the row; softmax: to the all-ones vector).
    The sum of N rounded terms is bounded by rtol * sum|dx|: atol is scaled to that; the
    op's allowance for dx, summed over the row, is added."""
    outputs = run(args, kwargs)
    dx = outputs[0].double()
    rtol, atol = tol(outputs[0].dtype)
    row_sums = dx.sum(-1, keepdim=True) if dx.dim() else dx
    magnitude = dx.abs().sum(-1, keepdim=True) if dx.dim() else dx.abs()
    scales = (1.0 + magnitude * (rtol / atol),)
    allowed = allow(args, kwargs)
    row_allowance = None
    if allowed is not None and allowed[0] is not None:
        row_allowance = (allowed[0].sum(-1, keepdim=True) if dx.dim() else allowed[0],)
    return [Comparison("0 (the row sum of dx)", (row_sums,),
                       (torch.zeros_like(row_sums),), error_scales=scales,
                       tolerance_dtype=outputs[0].dtype, allowances=row_allowance)]


def nll_of_log_softmax(run, tol, args, kwargs, allow):
    """Cross-entropy without label smoothing, per row, is the NLL of log_softmax:
    loss = -log_softmax(x)[label] and dlogits = softmax(x) - onehot(label), 0 on ignored
    rows, against the same family's log_softmax and softmax (rounded to x's dtype, whose
    tolerance applies). softmax(x) carries its error relative to itself, so the label's
    column of the reference, p - 1 with p near 1, errs by up to the tolerance of p, not of
    the small difference (float16: p = 0.939 rounds by up to 2.4e-4, where the bound at
    0.061 was 1.4e-4): atol grows by rtol * p there."""
    logits, labels = args[0], args[1]
    loss, dlogits = run(args, dict(kwargs, label_smoothing=0.0, reduction="none"))[:2]
    log_p = run((logits,), {}, op="log_softmax")[0].double()
    p = run((logits,), {}, op="softmax")[0].double()
    keep = labels != kwargs.get("ignore_index", -100)
    safe = torch.where(keep, labels, torch.zeros_like(labels)).long()
    nll = torch.where(keep, -log_p.gather(-1, safe[..., None]).squeeze(-1), 0.0)
    onehot = torch.nn.functional.one_hot(safe, logits.shape[-1]).double()
    grad = torch.where(keep[..., None], p - onehot, 0.0)
    rtol, atol = tol(logits.dtype)
    return [Comparison("-log_softmax(x)[label] and softmax(x) - onehot(label)",
                       (loss, dlogits), (nll, grad), tolerance_dtype=logits.dtype,
                       error_scales=(None, 1.0 + p.abs() * onehot * (rtol / atol)))]


def rotation_preserves_norm(run, tol, args, kwargs, allow):
    """A rotary embedding rotates pairs of the first rotary_dim columns: the norm of
    those columns of each head is unchanged (either pairing), the other columns too."""
    x = args[0]
    y = run(args, kwargs)[0].double()
    rotary = x.shape[-1] if kwargs.get("rotary_dim") is None else kwargs["rotary_dim"]
    x = x.double()
    norms = (y[..., :rotary].norm(dim=-1, keepdim=True), y[..., rotary:].abs())
    expected = (x[..., :rotary].norm(dim=-1, keepdim=True), x[..., rotary:].abs())
    return [Comparison("the norm of each head's rotated columns, and the others", norms,
                       expected, tolerance_dtype=args[0].dtype)]


def rope_backward_inverts(run, tol, args, kwargs, allow):
    """rope_backward rotates by the opposite angles: applied to rope(x) it gives x back.
    y's rounding (rtol of each of y1, y2) reaches x1 = y1 cos + y2 sin as rtol times
    |y1| + |y2|: atol is scaled to that."""
    y = run(args, kwargs)[0]
    back = run((y, *args[1:]), kwargs, op="rope_backward")
    rtol, atol = tol(y.dtype)
    half = (y.shape[-1] if kwargs.get("rotary_dim") is None else kwargs["rotary_dim"]) // 2
    mag = y.double().abs()
    if kwargs.get("interleaved", False):
        pair = mag[..., 0:2 * half:2] + mag[..., 1:2 * half:2]
        pair = torch.stack((pair, pair), dim=-1).flatten(-2)
    else:
        pair = mag[..., :half] + mag[..., half:2 * half]
        pair = torch.cat((pair, pair), dim=-1)
    pair = torch.cat((pair, mag[..., 2 * half:]), dim=-1)
    return [Comparison("x (rope_backward of rope(x))", back, (args[0],),
                       error_scales=(1.0 + pair * (rtol / atol),))]


def linear_in_up(run, tol, args, kwargs, allow):
    """A gated unit act(a) * b is linear in b: doubling b (exact) doubles the output."""
    a, b = args[0], args[1]
    base = run(args, kwargs)
    doubled = run((a, (b.double() * 2).to(b.dtype), *args[2:]), kwargs)
    return [Comparison("2 f(a, b) for b doubled", doubled, (base[0].double() * 2,))]


def key_value_permutation_invariance(run, tol, args, kwargs, allow):
    """Attention does not depend on the order of the keys when the values move with them:
    k and v permuted together along the key axis give the same output. A causal mask ties
    keys to positions, so both calls run without it."""
    q, k, v = args[:3]
    kwargs = {n: x for n, x in kwargs.items() if n not in ("causal", "causal_offset")}
    perm = torch.randperm(k.shape[-2], generator=torch.Generator().manual_seed(k.shape[-2]))
    permuted = (q, k[..., perm, :], v[..., perm, :], *args[3:])
    base = run(args, kwargs)
    other = run(permuted, kwargs)
    return [Comparison("f(q, k, v) with keys and values in another order", other, tuple(base),
                       allowances=_sum_allowances(allow(args, kwargs), allow(permuted, kwargs)))]


RELATIONS = {r.name: r for r in (
    Relation("shift_invariance", "f(x + c) == f(x)", ("normal", "large_offset"),
             shift_invariance),
    Relation("scale_invariance", "f(a x, eps a^2) == f(x, eps)", ("normal", "large_offset"),
             scale_invariance),
    Relation("permutation_invariance", "f(permuted x) == f(x)",
             ("normal", "wide_range", "tiny", "with_specials"), permutation_invariance),
    Relation("log_of_softmax", "log_softmax(x) == log(softmax(x))", ("normal",),
             log_of_softmax),
    Relation("gradient_rows_sum_to_zero", "dx sums to 0 over each row", ("normal",),
             gradient_rows_sum_to_zero),
    Relation("nll_of_log_softmax", "cross_entropy(x, y) == -log_softmax(x)[y]", ("normal",),
             nll_of_log_softmax),
    Relation("rotation_preserves_norm", "|rope(x)| == |x| per head",
             ("normal", "large_offset", "wide_range"), rotation_preserves_norm),
    Relation("rope_backward_inverts", "rope_backward(rope(x)) == x", ("normal", "wide_range"),
             rope_backward_inverts),
    Relation("linear_in_up", "f(a, 2b) == 2 f(a, b)", ("normal", "large_offset", "wide_range"),
             linear_in_up),
    Relation("key_value_permutation_invariance", "f(q, k[perm], v[perm]) == f(q, k, v)",
             ("normal", "wide_range"), key_value_permutation_invariance),
)}


def get(name: str) -> Relation:
    try:
        return RELATIONS[name]
    except KeyError:
        raise KeyError(f"unknown relation '{name}'; known: {', '.join(sorted(RELATIONS))}") \
            from None
