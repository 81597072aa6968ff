import torch

from _fake_lib_fault import planted

F = torch.nn.functional


def cross_entropy_forward(_input, target, weight, ignore_index, lse_square_scale,
                          label_smoothing, reduction, softcap, return_z_loss,
                          return_token_accuracy=False, return_predicted_tokens=False):
    """Writes the gradient into _input when it requires grad, as the real one does; the
    loss has _input's dtype."""
    x = _input.detach().double().requires_grad_()
    with torch.enable_grad():
        loss = F.cross_entropy(x, target, ignore_index=ignore_index,
                               label_smoothing=label_smoothing, reduction=reduction)
        (grad,) = torch.autograd.grad(loss, x, torch.ones_like(loss))
    if _input.requires_grad:
        with torch.no_grad():
            _input.copy_(grad.to(_input.dtype))
    loss = planted("cross_entropy_forward", loss.detach()).to(_input.dtype)
    return loss, None, None, None, _input
