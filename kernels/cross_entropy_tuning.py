"""The cross-entropy family's tuning: its fields, declared once with their defaults, and
the function its launcher reads them through. A profile sets the values its target
overrides in ``[tuning.cross_entropy]``."""
from __future__ import annotations

import torch

from triton_cts.profiles import Profile
from triton_cts.profiles.fields import count
from triton_cts.profiles.plausible import Range
from triton_cts.profiles.tuning import declare_tuning

FAMILY = "cross_entropy"

FIELDS = declare_tuning(FAMILY, {
    "one_launch_elements": count(
        "logits (rows x classes) up to which a cross-entropy reduced to a sum or mean is "
        "one launch: every program counts the labels not ignored and the last to finish "
        "sums the losses; a count, the loss kernel and a sum where absent",
        plausible=Range(1, 1 << 40, "logits of a call: the size where the host stops being "
                                    "the limit"),
        default_text="absent (a count, the loss kernel and a sum)", unit="elements"),
})


def one_launch(profile: Profile, n_rows: int, n_cols: int) -> bool:
    """Whether a cross-entropy of ``n_rows`` rows of ``n_cols`` logits reduced to a sum or
    mean is one launch: every program counts the labels not ignored itself (in one step of
    ``elementwise_block(float32)`` labels, so no more rows than that) and the program that
    finishes last sums the losses. Up to ``one_launch_elements`` logits, and where the
    target has an int32 atomic_add to count the programs that are done; else a count, the
    loss kernel and a sum (three launches for a mean, two for a sum)."""
    limit = profile.tuning(FAMILY)["one_launch_elements"]
    return (limit is not None and n_rows * n_cols <= limit
            and n_rows <= profile.elementwise_block(torch.float32)
            and profile.supports_atomic("add", torch.int32))
