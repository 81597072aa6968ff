import torch

from _fake_lib_fault import planted


def _gelu(a):
    return torch.nn.functional.gelu(a.double(), approximate="tanh")


def geglu_forward(a, b):
    c = (_gelu(a).to(b.dtype) * b)
    return a, b, planted("geglu_forward", c)


def geglu_backward(a, b, dc):
    """Writes da into a and db into b, as the real one does."""
    x = a.detach().double().requires_grad_()
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(torch.nn.functional.gelu(x, approximate="tanh"), x,
                                      torch.ones_like(x))
    da = planted("geglu_backward", dc.double() * b.double() * grad)
    db = dc.double() * _gelu(a)
    a.copy_(da.to(a.dtype))
    b.copy_(db.to(b.dtype))
    return a, b
