import torch

from _fake_lib_fault import planted


def _grads(fn, a, b, dc):
    x, y = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    with torch.enable_grad():
        return torch.autograd.grad(fn(x) * y, (x, y), dc.double())


def swiglu_forward(a, b, gate_multiplier=1.0):
    c = torch.nn.functional.silu(a.double()) * b.double()
    return a, b, planted("swiglu_forward", c).to(a.dtype)


def swiglu_backward(a, b, dc, gate_multiplier=1.0):
    """Writes da into a and db into b, as the real one does."""
    da, db = _grads(torch.nn.functional.silu, a, b, dc)
    a.copy_(planted("swiglu_backward", da).to(a.dtype))
    b.copy_(db.to(b.dtype))
    return a, b
