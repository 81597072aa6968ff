"""Reference Triton kernels, one module per op family (a package where a family divides:
``layer_norm/`` holds its forward, backward and shared tile helpers).

Each module reads top to bottom: the ``@triton.jit`` kernels, then the launchers. A
launcher takes a :class:`triton_cts.profiles.Profile` and reads every hardware-dependent
constant (block sizes, MAX_FUSED_SIZE, MAX_GRID_NUM, num_warps, IO strategy) from it.
Modules import each other relatively; the same import serves device, compile and
interpreter checks (``triton_cts/execution/launches.py`` routes JIT launches).
"""
