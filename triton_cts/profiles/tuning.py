"""Kernel tuning, owned by the kernel family that reads it.

Each family declares its tuning fields beside its launcher with :func:`declare_tuning`
(the same :class:`~triton_cts.profiles.fields.Field` declarations as the profile schema:
type, unit, plausible range, default derived from the hardware facts, meaning). A profile
sets the values its target overrides in ``[tuning.<family>]``; validation holds those
against the family's declaration, with the same errors (file, field, expected type), and
``Profile.tuning(family)`` returns the merged values. A profile without tuning tables runs
every kernel on the derived defaults.

Families are found by module name, as ``OpSpec`` names its kernels, so imports still go one
way: kernels import ``triton_cts.profiles``, never the reverse.
"""
from __future__ import annotations

import importlib
import sys

from triton_cts import CHECKOUT
from triton_cts.profiles.fields import Field

#: Family -> the module that declares its tuning fields (imported on first use).
FAMILY_MODULES: dict[str, str] = {
    "attention": "kernels.attention.plan",
    "cross_entropy": "kernels.cross_entropy_tuning",
    "layer_norm": "kernels.layer_norm.tuning",
    "matmul": "kernels.matmul.tuning",
    "reductions": "kernels.reductions_tuning",
    "softmax": "kernels.softmax_tuning",
}

_DECLARED: dict[str, dict[str, Field]] = {}


def declare_tuning(family: str, fields: dict[str, Field]) -> dict[str, Field]:
    """Register ``family``'s tuning fields (name -> optional :class:`Field` with a
    default); returns ``fields``. A family must be listed in :data:`FAMILY_MODULES`."""
    if family not in FAMILY_MODULES:
        raise ValueError(f"tuning family '{family}' is not in FAMILY_MODULES "
                         f"({', '.join(sorted(FAMILY_MODULES))})")
    required = [name for name, f in fields.items() if f.required]
    if required:
        raise ValueError(f"tuning family '{family}': fields {required} must be optional "
                         f"(a profile without tuning runs on the defaults)")
    _DECLARED[family] = dict(fields)
    return fields


def declaration(family: str) -> dict[str, Field]:
    """``family``'s declared fields, importing its module where not yet imported."""
    if family not in _DECLARED:
        # the kernels sit in the checkout beside this package, which a run of a user's
        # project (rootdir elsewhere) does not have on sys.path
        if str(CHECKOUT) not in sys.path:
            sys.path.append(str(CHECKOUT))
        importlib.import_module(FAMILY_MODULES[family])
    if family not in _DECLARED:
        raise ValueError(f"{FAMILY_MODULES[family]} declares no tuning for '{family}'")
    return _DECLARED[family]


def families() -> dict[str, dict[str, Field]]:
    """Every family's declaration, by family name."""
    return {family: declaration(family) for family in sorted(FAMILY_MODULES)}
