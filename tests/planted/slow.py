"""A GELU that is right but takes a minute: a check that is still running when a test
interrupts the run. It touches the file named by ``SLOW_GELU_STARTED`` (if set) when it
starts, so the test knows when to send the signal."""
import os
import time
from pathlib import Path

from kernels.gelu import gelu


def gelu_slow(x, *, profile):
    started = os.environ.get("SLOW_GELU_STARTED")
    if started:
        Path(started).touch()
    time.sleep(float(os.environ.get("SLOW_GELU_SECONDS", "60")))
    return gelu(x, profile=profile)
