"""The Ascend toolchain environment: triton-ascend (which replaces the ``triton`` package)
and ``bishengir-compile`` live in their own virtual environment, ``tox -e npu`` (``.tox/npu``),
or any Python named by ``TRITON_CTS_NPU_PYTHON``. This module finds it and says why
kernels are not lowered with it (missing, incomplete, or the driver not written yet).
"""
from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from triton_cts import CHECKOUT

PYTHON_ENV = "TRITON_CTS_NPU_PYTHON"
CREATE_HINT = ("create it with `tox -e npu --notest` (a venv in .tox/npu with triton-ascend "
               "3.2.0, pybind11, ascendnpu-ir 1.2.0 and CPU torch), or set "
               f"{PYTHON_ENV} to a Python that has them")


def npu_python() -> Path | None:
    explicit = os.environ.get(PYTHON_ENV)
    if explicit:
        return Path(explicit)
    candidate = CHECKOUT / ".tox" / "npu" / "bin" / "python"
    return candidate if candidate.exists() else None


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str:
    """Why kernels are not lowered with triton-ascend and bishengir here."""
    python = npu_python()
    if python is None:
        return f"no NPU toolchain environment; {CREATE_HINT}"
    probe = ("import triton, ascendnpuir; from triton.backends import backends; "
             "assert 'ascend' in backends, 'no ascend backend'; print(triton.__version__)")
    try:
        run = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {python}: {exc}; {CREATE_HINT}"
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{python} lacks triton-ascend or ascendnpu-ir ({last}); {CREATE_HINT}"
    # triton-ascend 3.2 has no triton.knobs and another ASTSource/attrs API, so the kernel
    # modules cannot be imported there as they are, nor upstream 3.9 TTIR parsed by it.
    return (f"{python} has triton-ascend {run.stdout.strip()}, but driving its ttadapter "
            f"stage and bishengir-compile from captured launches is not implemented yet")
