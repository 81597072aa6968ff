"""Run a check target on a drawn case, in its mode."""
from __future__ import annotations

import torch

from triton_cts.modes import execute


def upcast(value):
    """Floating tensors to float64, for the reference."""
    if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
        return value.to(torch.float64)
    if isinstance(value, (tuple, list)):
        return type(value)(upcast(v) for v in value)
    return value


def clone_args(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def run_target(target, args: tuple, kwargs: dict):
    """The implementation's outputs (device/interpreter) or captured launches (compile)."""
    fn = target.impl.load()
    return execute(fn, target.mode, target.profile, clone_args(args), kwargs,
                   takes_profile=target.impl.takes_profile(fn))


def run_reference(target, args: tuple, kwargs: dict):
    return target.op.reference(*upcast(clone_args(args)), **{k: upcast(v) for k, v in kwargs.items()})
