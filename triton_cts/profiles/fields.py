"""How a profile field is declared: once, with what it must be, its unit, its plausible
range, its default and what it means. The schema (:mod:`triton_cts.profiles.schema`), the
kernel families' tuning tables (:mod:`triton_cts.profiles.tuning`), validation, error
messages and the reference page ``docs/profiles.md`` all read these declarations.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from triton_cts.profiles.plausible import Range

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


@dataclass(frozen=True)
class Field:
    """One profile field. ``expected`` is what error messages say the value must be (its
    type, and in parentheses what it means); ``default`` is the value where an optional
    field is absent, a constant or a function of the profile (derived from its hardware
    facts), described for the reference page by ``default_text``; ``plausible`` bounds
    every number in it (a list's or table's too)."""
    check: Callable[[Any], bool]
    expected: str
    required: bool = True
    plausible: Range | None = None
    default: Any = None
    default_text: str = ""
    unit: str = ""
    #: a tile list whose third number is num_warps (held to limits.max_num_warps)
    tile_warps: bool = False
    #: a row-group tile: its programs wait for each other, so all must be resident at once
    group: bool = False

    def default_for(self, profile) -> Any:
        """The value an absent field takes on ``profile``."""
        return self.default(profile) if callable(self.default) else self.default

    def describe_default(self) -> str:
        if self.required:
            return "required"
        if self.default_text:
            return self.default_text
        if isinstance(self.default, bool):
            return str(self.default).lower()
        return "absent" if self.default is None else repr(self.default)


# ---- what a value may be --------------------------------------------------------------
def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_pos_int(v):
    return is_int(v) and v > 0


def is_number(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and v >= 0


def is_str(v):
    return isinstance(v, str) and v != ""


def is_list_of(pred):
    return lambda v: isinstance(v, list) and all(pred(x) for x in v)


def one_of(*choices):
    return lambda v: v in choices


def is_table(v):
    return isinstance(v, dict)


def is_pow2(v):
    return is_pos_int(v) and (v & (v - 1)) == 0


def is_threshold_table(v):
    return is_list_of(lambda p: is_list_of(is_pos_int)(p) and len(p) in (2, 3))(v)


def is_flag(v):
    return isinstance(v, bool)


# ---- plausible ranges shared by many fields ------------------------------------------
#: A Triton block holds at most 2^20 elements (TRITON_MAX_TENSOR_NUMEL), 8 MiB of float64;
#: a program holds at least one 16-byte vector.
PER_UNIT = Range(1, 1024, "programs per compute unit: a few")
BLOCK_BYTES = Range(16, 8 * MiB, "bytes one program holds: at least a 16-byte vector, at "
                                 "most Triton's 2^20-element block of float64")
BLOCK_ELEMENTS = Range(1, 1 << 20, "elements: a Triton block holds at most 2^20 elements")
WARPS_TABLE = Range(1, 1 << 20, "block elements and warps: a Triton block holds at most "
                                "2^20 elements")
TILE = Range(1, 1 << 20, "rows, columns, warps and programs a unit of one program")

#: What a [min_block_elements, num_warps] table holds, and its optional third number.
TABLE = ("a list of [min_block_elements, num_warps] pairs, ascending; an entry may add a "
         "third number, the programs kept resident per compute unit (their registers are "
         "capped to fit: CUDA only)")


# ---- field builders ------------------------------------------------------------------
def count(use: str, plausible: Range = PER_UNIT, default: Any = None, default_text: str = "",
          unit: str = "") -> Field:
    """An optional positive int."""
    return Field(is_pos_int, f"a positive int ({use})", required=False, plausible=plausible,
                 default=default, default_text=default_text, unit=unit)


def flag(use: str, default: bool = False) -> Field:
    """An optional true/false."""
    return Field(is_flag, f"true or false ({use})", required=False, default=default)


def pow2_bytes(use: str, plausible: Range = BLOCK_BYTES, default: Any = None,
               default_text: str = "") -> Field:
    """An optional power of two of bytes."""
    return Field(is_pow2, f"a power of two ({use})", required=False, plausible=plausible,
                 default=default, default_text=default_text, unit="bytes")


def warps_table(use: str, default_text: str) -> Field:
    """An optional warps table of some programs (``use``); ``default_text`` says what
    stands in where it is absent."""
    return Field(is_threshold_table, f"{TABLE} ({use}; {default_text} where absent)",
                 required=False, plausible=WARPS_TABLE, default_text=default_text,
                 unit="elements, warps")


def column_tile(what: str, group: bool = False) -> Field:
    """[rows, columns, num_warps, programs per compute unit] of a program; ``group``: of a
    row-group strategy, whose programs must all be resident."""
    return Field(
        lambda v: is_list_of(is_int)(v) and len(v) == 4
        and all(is_pow2(n) for n in v[:3]) and v[3] >= 1,
        f"a list of 4 ints: [rows, columns, num_warps] (powers of two) and programs per "
        f"compute unit (>= 1) {what}", required=False, plausible=TILE,
        default_text="absent (the strategy is not taken)" if group
        else "absent (the launcher derives it)", tile_warps=True, group=group)


def row_group_tile(what: str) -> Field:
    """[rows a meeting, columns, num_warps, resident programs(, row blocks in flight)]."""
    return Field(
        lambda v: is_list_of(is_int)(v) and len(v) in (4, 5)
        and all(is_pow2(n) for n in v[:3]) and v[3] >= 1 and v[4:] in ([], [1], [2]),
        f"a list of 4 or 5 ints: [rows a meeting, columns, num_warps] (powers of two), "
        f"programs kept resident per compute unit (>= 1) and optionally row blocks in "
        f"flight (1, or 2: the next rows' loads issued before each meeting) {what}",
        required=False, plausible=TILE, default_text="absent (the strategy is not taken)",
        tile_warps=True, group=True)
