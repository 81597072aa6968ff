"""Reference Triton kernels, one module per op family.

Each module reads top to bottom: the ``@triton.jit`` kernels, then the launchers. A
launcher takes a :class:`triton_cts.profiles.Profile` and reads every hardware-dependent
constant (block sizes, MAX_FUSED_SIZE, MAX_GRID_NUM, num_warps, IO strategy) from it.
Modules import each other relatively, so the harness can load an interpreted copy of
the whole package beside the JIT one (see ``triton_cts/loader.py``).
"""
