"""Vendor profiles: one TOML file per hardware target, validated on load.

- :mod:`~triton_cts.profiles.schema`: every field, what it must be, cross-field rules;
- :mod:`~triton_cts.profiles.profile`: the :class:`Profile` object launchers read
  constants from, and the loader of ``vendor_profiles/*.toml``;
- :mod:`~triton_cts.profiles.vendor_selection`: the attached device, its profile, and
  what ``--vendor`` selects.

Launchers import what they need from here (``from triton_cts.profiles import Profile``).
"""
from triton_cts.profiles.profile import (EmptyProfileDirWarning, Profile, cdiv,
                                         load_profile, load_profiles, next_power_of_2,
                                         profile_from_dict)
from triton_cts.profiles.schema import DTYPES, SCHEMA, VENDOR_FAMILIES, ProfileError

__all__ = [
    "Profile", "ProfileError", "load_profile", "load_profiles", "profile_from_dict",
    "next_power_of_2", "cdiv", "VENDOR_FAMILIES", "DTYPES", "SCHEMA",
    "EmptyProfileDirWarning",
]
