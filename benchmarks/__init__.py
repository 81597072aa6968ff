"""Benchmarks: time, GB/s (or TFLOP/s), % of the profile's peak and of the measured copy
bandwidth, and speedup over torch eager, for the reference kernels. Run with
``python -m benchmarks`` on a machine with an accelerator."""


def all_ops() -> tuple[str, ...]:
    """Every op the benchmarks time, in the order they run."""
    from benchmarks import attention_cases, cases, llm_cases
    return (*cases.MEMORY_OPS, "matmul", *llm_cases.LLM_OPS, *attention_cases.ATTENTION_OPS)
