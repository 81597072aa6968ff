"""Rows read twice: telling the L2 which lines to keep.

The two-pass row kernels (the tiled layer-norm forward and backward, the online softmax
and the looped softmax backward) read a row for its sums, then read it again to write the
output. Between the two reads every resident program streams its own row through the
L2, and past about 16384 columns the rows in flight no longer fit: the second read comes
from DRAM again (ncu: benchmarks/results/h100.jsonl, experiment "comments").

Where the profile says the target honours them (``io.l2_eviction_hints``), the launchers
pass two constexprs: ``KEEP`` ("evict_last") for the first pass's loads, and ``STREAM``
("evict_first") for the second pass's loads and the output's stores, which nothing reads
again. Elsewhere both are "", Triton's default.
"""
from triton_cts.profiles import Profile


def l2_hints(profile: Profile, keep: bool = True) -> dict[str, str]:
    """KEEP and STREAM of a two-pass row kernel; ``keep=False`` leaves the first pass
    unhinted (where keeping it measured slower)."""
    if not profile.l2_eviction_hints:
        return {"KEEP": "", "STREAM": ""}
    return {"KEEP": "evict_last" if keep else "", "STREAM": "evict_first"}
