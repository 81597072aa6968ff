import torch

from _fake_lib_fault import planted

F = torch.nn.functional


def fused_linear_cross_entropy_forward(
        _input, weight, target, ce_weight=None, bias=None, ignore_index=-100,
        lse_square_scale=0.0, label_smoothing=0.0, reduction="mean", softcap=None,
        return_z_loss=False, accum_dtype=None, use_token_scaling=False,
        return_token_accuracy=False, return_predicted_tokens=False, ce_impl=None,
        ce_mode=None, token_grad_output=None, compute_gradients=None,
        weight_requires_grad=None, chunk_mem_const=1):
    """The loss (float32) and, where compute_gradients (else _input.requires_grad), the
    gradients for an upstream gradient of 1, as the real one returns them; computed
    unfused in float64."""
    wants = _input.requires_grad if compute_gradients is None else compute_gradients
    x, w = _input.detach().double().requires_grad_(), weight.detach().double().requires_grad_()
    b = bias.detach().double().requires_grad_() if bias is not None else None
    with torch.enable_grad():
        logits = x @ w.t() + (b if b is not None else 0.0)
        loss = F.cross_entropy(logits, target, ignore_index=ignore_index,
                               label_smoothing=label_smoothing, reduction=reduction)
        inputs = (x, w) + ((b,) if b is not None else ())
        grads = torch.autograd.grad(loss, inputs, torch.ones_like(loss))
    loss = planted("fused_linear_cross_entropy_forward", loss.detach()).float()
    if not wants:
        return loss, None, None, None, None, None, None
    grad_b = grads[2].to(bias.dtype) if bias is not None else None
    return (loss, None, None, None, grads[0].to(_input.dtype), grads[1].to(weight.dtype),
            grad_b)
