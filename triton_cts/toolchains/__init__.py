"""Compilers a check runs without the target's hardware.

- :mod:`~triton_cts.toolchains.cross_compile`: CUDA and HIP through upstream Triton:
  resource use, occupancy, limit and quality verdicts;
- :mod:`~triton_cts.toolchains.golden`: golden compile stats per Triton version and
  profile (``python -m triton_cts.toolchains.golden refresh``);
- Ascend: :mod:`~triton_cts.toolchains.npu_lint` (IO lint over TTIR),
  :mod:`~triton_cts.toolchains.npu_toolchain` (the toolchain venv, verdicts) and
  :mod:`~triton_cts.toolchains.npu_driver` (lowering inside that venv).
"""
