"""Resolve an implementation's ``module:function`` with clear errors.

Every mode uses the same import: ``triton_cts.launches`` routes JIT kernels to the
interpreter while interpreter checks run, so no second copy of a module is needed.
"""
from __future__ import annotations

import importlib
from typing import Callable


class ImplementationLoadError(ImportError):
    """An implementation's ``module:function`` cannot be imported or found."""


def resolve(target: str) -> Callable:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ImplementationLoadError(f"'{target}' is not of the form 'module:function'")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImplementationLoadError(f"cannot import '{module_name}': {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImplementationLoadError(
                f"module '{module_name}' has no attribute '{attr}'") from None
    if not callable(obj):
        raise ImplementationLoadError(f"'{target}' is not callable")
    return obj
