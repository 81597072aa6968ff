"""Running checks: how an implementation is executed in each mode and what is observed.

- :mod:`~triton_cts.execution.modes`: the execution modes, what this machine can run,
  ``execute``;
- :mod:`~triton_cts.execution.launches`: launch recording, compile-mode capture and
  routing of JIT kernels to the interpreter;
- :mod:`~triton_cts.execution.input_checks`: the input checks every launcher makes;
- :mod:`~triton_cts.execution.grid_check`, :mod:`~triton_cts.execution.autotune_probe`:
  observers of recorded grids and of the autotuner;
- :mod:`~triton_cts.execution.interpreter_defects`: known interpreter defects, probed;
- :mod:`~triton_cts.execution.lost_context`: a sticky device error ends one check only.
"""
