"""GELU launchers that cheat or are careless the way kernels under test have been: each
computes with the reference launcher and breaks one rule of a call that the suites must
catch."""
import torch

from kernels.gelu import gelu

_CACHE: dict = {}


def gelu_writes_into_input(x, *, profile):
    """Writes the result over its input and returns the input."""
    y = gelu(x, profile=profile)
    x.copy_(y)
    return x


def gelu_reuses_result(x, *, profile):
    """Right the first time it sees a shape and dtype; later calls return that result."""
    key = (tuple(x.shape), x.dtype, x.device)
    if key not in _CACHE:
        _CACHE[key] = gelu(x, profile=profile)
    return _CACHE[key]


def gelu_on_default_stream(x, *, profile):
    """Launches on the device's default stream whatever stream the caller made current
    (a launcher that caches a stream handle, or passes stream 0): right on the default
    stream, racing the caller on any other."""
    with torch.cuda.stream(torch.cuda.default_stream(x.device)):
        return gelu(x, profile=profile)
