"""Differentiable ops from an implementation's forward and backward ops, so that a model
can train on a library's kernels (suites/test_convergence.py).

The adapters expose an op's forward and its backward as separate ops of the op interface:
``swiglu(a, b)`` and ``swiglu_backward(dy, a, b) -> (da, db)``; ``fused_add_rms_norm``
returning ``(y, h, rstd)`` and ``fused_add_rms_norm_backward(dy, dh_out, h, weight, rstd)
-> (dh, dweight)``; ``cross_entropy`` returning ``(loss, dlogits)``, its gradient written
in the forward. :func:`differentiable` joins them in one ``torch.autograd.Function``: the
forward op computes the outputs and the backward op, where the implementation has one,
the input gradients from what the forward saved. Where it has only the forward (FlagGems'
attention, RoPE and fused add + RMS norm; Liger's RoPE), or its backward cannot run here,
the backward recomputes the op's torch version under autograd at the saved inputs: the
forward is the implementation's, the gradient torch's.

How an op's calls fit together (:class:`Interface`) belongs to the op, not to a library:
one table, :data:`INTERFACES`, serves every implementation.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Mapping

import torch
import torch.nn.functional as F

from triton_cts.ops.rope import rotate


def _add_rms_norm(x, residual, weight, *, eps):
    h = x + residual
    return F.rms_norm(h, (h.shape[-1],), weight, eps), h


def _cross_entropy(logits, labels, *, ignore_index, label_smoothing, reduction):
    n = logits.shape[-1]
    loss = F.cross_entropy(logits.reshape(-1, n), labels.reshape(-1), ignore_index=ignore_index,
                           label_smoothing=label_smoothing, reduction=reduction)
    return loss.view(labels.shape) if reduction == "none" else loss


def _attention(q, k, v, *, causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


@dataclass(frozen=True)
class Interface:
    """One op as a model calls it. ``torch(*inputs, **options)``: the op in torch ops,
    differentiable, returning what the model uses; ``returns``: which of the op's outputs
    those are; ``saves``: the outputs its backward takes; ``backward``: the backward op's
    name (None: the gradient comes from the forward's outputs); ``grads(backward, inputs,
    saved, output_grads, options)``: the inputs' gradients (None where none flows)."""

    torch: Callable
    returns: tuple[int, ...] = (0,)
    saves: tuple[int, ...] = ()
    backward: str | None = None
    grads: Callable | None = None


INTERFACES: Mapping[str, Interface] = {
    "fused_add_rms_norm": Interface(
        _add_rms_norm, returns=(0, 1), saves=(1, 2), backward="fused_add_rms_norm_backward",
        # h = x + residual: both get dh
        grads=lambda bwd, ins, saved, g, o: (lambda dh, dw: (dh, dh, dw))(
            *bwd(g[0].contiguous(), g[1].contiguous(), saved[0], ins[2], saved[1]))),
    "rope": Interface(
        lambda x, cos, sin, *, offset, rotary_dim: rotate(x, cos, sin, offset=offset,
                                                          rotary_dim=rotary_dim),
        backward="rope_backward",
        # the tables are constants of the positions: no gradient
        grads=lambda bwd, ins, saved, g, o: (bwd(g[0].contiguous(), ins[1], ins[2], **o),
                                             None, None)),
    "swiglu": Interface(
        lambda a, b: F.silu(a) * b, backward="swiglu_backward",
        grads=lambda bwd, ins, saved, g, o: tuple(bwd(g[0].contiguous(), ins[0], ins[1]))),
    "attention": Interface(
        _attention, backward="attention_backward",
        grads=lambda bwd, ins, saved, g, o: tuple(bwd(*ins, g[0].contiguous(), **o))),
    "cross_entropy": Interface(
        _cross_entropy, saves=(1,),
        # dlogits is the gradient for an upstream gradient of 1: scale it
        grads=lambda bwd, ins, saved, g, o: (saved[0] * g[0].to(saved[0].dtype), None)),
}


@dataclass(frozen=True)
class DifferentiableOp:
    """``interface`` computed by ``forward`` (an implementation's callable, returning the
    op's outputs at positions ``outputs``, None: all) and differentiated by ``backward``
    (None: torch recomputed), with the options fixed."""

    interface: Interface
    forward: Callable
    backward: Callable | None
    options: Mapping
    outputs: tuple[int, ...] | None = None

    def __call__(self, *inputs):
        out = _Function.apply(self, *inputs)
        return out if len(self.interface.returns) > 1 else out[0]

    def run_forward(self, inputs):
        result = self.forward(*inputs, **self.options)
        result = result if isinstance(result, (tuple, list)) else (result,)
        at = dict(zip(self.outputs or range(len(result)), result))
        missing = [i for i in self.interface.returns if i not in at]
        if missing:
            raise ValueError(f"{self.forward!r} does not compute the op's outputs {missing}, "
                             f"which the model uses")
        saved = [at.get(i) for i in self.interface.saves]
        # without a saved output (an implementation returning fewer), torch differentiates
        usable = self.interface.grads is not None and None not in saved and (
            self.interface.backward is None or self.backward is not None)
        return tuple(at[i] for i in self.interface.returns), (saved if usable else None)


class _Function(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op: DifferentiableOp, *inputs):
        outs, saved = op.run_forward(inputs)
        ctx.op, ctx.n_inputs, ctx.from_op = op, len(inputs), saved is not None
        ctx.save_for_backward(*inputs, *(saved or ()))
        return outs

    @staticmethod
    def backward(ctx, *grads):
        op, n = ctx.op, ctx.n_inputs
        inputs, saved = ctx.saved_tensors[:n], ctx.saved_tensors[n:]
        needs = ctx.needs_input_grad[1:]
        if ctx.from_op:  # grads of unused outputs arrive as zeros (materialized)
            dins = op.interface.grads(op.backward, inputs, saved, grads, op.options)
        else:
            dins = _torch_grads(op, inputs, needs, grads)
        return (None, *(d if need else None for d, need in zip(dins, needs)))


def _torch_grads(op: DifferentiableOp, inputs, needs, grads):
    """The inputs' gradients from the op's torch version, recomputed at the saved inputs."""
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_(need) for t, need in zip(inputs, needs)]
        outs = op.interface.torch(*leaves, **op.options)
        outs = outs if isinstance(outs, tuple) else (outs,)
        wanted = [t for t in leaves if t.requires_grad]
        got = iter(torch.autograd.grad(outs, wanted, grads, allow_unused=True))
    return tuple(next(got) if t.requires_grad else None for t in leaves)


def differentiable(impls: Mapping[str, object], op: str, options: Mapping, profile,
                   mode) -> tuple[Callable, str]:
    """``op`` as a differentiable callable of its inputs, from ``impls`` (op name ->
    :class:`~triton_cts.ops.implementation.Implementation` of one library), and where it
    comes from: ``"library"`` (forward and backward), ``"library forward, torch
    backward"``, or ``"torch (why)"`` where the library lacks the op or cannot run it here."""
    interface = INTERFACES[op]
    forward = _usable(impls.get(op), profile, mode)
    if not callable(forward):
        return functools.partial(interface.torch, **options), f"torch ({forward})"
    backward = _usable(impls.get(interface.backward), profile, mode) \
        if interface.backward else None
    backward = backward if callable(backward) else None
    outputs = impls[op].outputs
    fn = DifferentiableOp(interface, forward, backward, dict(options), outputs)
    own = interface.grads is not None and (interface.backward is None or backward is not None) \
        and all(i in (outputs or interface.saves) for i in interface.saves)
    return fn, "library" if own else "library forward, torch backward"


def _usable(impl, profile, mode):
    """The implementation's callable (with the profile, where it takes one), or why not."""
    if impl is None:
        return "the library has no kernel for it"
    why = impl.unsupported_reason(mode, profile)
    if why:
        return why
    fn = impl.load()
    return functools.partial(fn, profile=profile) if impl.takes_profile(fn) else fn
