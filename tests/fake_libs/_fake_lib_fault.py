"""The planted fault shared by the fake libraries: FAKE_LIB_FAULT names a function whose
result is perturbed."""
import os


def planted(name: str, out):
    if os.environ.get("FAKE_LIB_FAULT") == name:
        return out * 1.01 + 0.01
    return out
