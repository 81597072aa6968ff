"""The softmax family's tuning (softmax and log-softmax forward): its fields, declared
once with their defaults, and the function its launcher reads them through. A profile sets
the values its target overrides in ``[tuning.softmax]``."""
from __future__ import annotations

import torch

from triton_cts.profiles import Profile
from triton_cts.profiles.fields import pow2_bytes
from triton_cts.profiles.tuning import declare_tuning

FAMILY = "softmax"


def _max_fused_size_bytes(profile: Profile) -> int:
    return profile["launch.max_fused_size_bytes"]


FIELDS = declare_tuning(FAMILY, {
    "row_tile_bytes": pow2_bytes(
        "bytes of a row one program of the forward holds on data narrower than 32 bits: "
        "rows up to it fused, longer rows online in tiles of it; never past "
        "launch.max_fused_size_bytes", default=_max_fused_size_bytes,
        default_text="launch.max_fused_size_bytes"),
})


def row_tile(profile: Profile, dtype: torch.dtype) -> int:
    """Elements of ``dtype`` one program of the forward holds: rows up to it are fused,
    longer rows go online in tiles of it. ``row_tile_bytes`` on data narrower than 32 bits
    (never past MAX_FUSED_SIZE), else MAX_FUSED_SIZE."""
    tile = profile.max_fused_elements(dtype)
    if dtype.itemsize >= 4:
        return tile
    return max(1, min(tile, profile.tuning(FAMILY)["row_tile_bytes"] // dtype.itemsize))
