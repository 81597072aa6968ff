"""Benchmarks: time, GB/s (or TFLOP/s), % of the profile's peak and of the measured copy
bandwidth, and speedup over torch eager, for the reference kernels. Run with
``python -m benchmarks`` on a machine with an accelerator."""


def all_ops() -> tuple[str, ...]:
    """Every op the benchmarks time, in the order they run."""
    from benchmarks.cases import BENCHES
    return tuple(BENCHES)
