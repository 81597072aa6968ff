#!/usr/bin/env python3
"""FlagGems 5.0.2: reductions and softmaxes over dim -1 of a 0-d tensor fail with
"AssertionError: Invalid dim".

torch treats a 0-d tensor as one element along dim -1 (or 0): torch.softmax(x, -1) is 1,
log_softmax 0, the softmax backward 0, torch.max(x, -1) is (x, 0) and torch.prod(x, -1)
is x. flag_gems.ops.softmax, log_softmax, softmax_backward, max_dim and prod_dim assert
`dim >= -x.ndim and dim < x.ndim`, which no dim satisfies when x.ndim == 0 (the
dispatcher passes the dim unwrapped, so torch.softmax(x, -1) under flag_gems.enable()
fails the same way).

Suite example: shape (), value 1.5410 (float16, bfloat16, float32, float64; int32 and
int64 for max_dim); every test of these five ops failed on it, which also hid whatever
else those tests would have found.

Exit status: 1 if the bug reproduces, 0 if not, 2 if this machine cannot run it.
"""
import platform
import sys
import traceback

import torch


def environment():
    import flag_gems
    import triton
    print(f"python {platform.python_version()}, torch {torch.__version__}, triton "
          f"{triton.__version__}, flag_gems {flag_gems.__version__}")
    print(f"device: {torch.cuda.get_device_name()} (sm_{''.join(map(str, torch.cuda.get_device_capability()))})")


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: cannot run")
        return 2
    try:
        import flag_gems
        from flag_gems import ops
    except Exception as exc:  # noqa: BLE001
        print(f"flag_gems cannot be imported: {type(exc).__name__}: {exc}")
        return 2
    environment()
    x = torch.tensor(1.5410, dtype=torch.float32, device="cuda")
    y = torch.softmax(x, -1)
    dy = torch.tensor(0.25, dtype=torch.float32, device="cuda")
    calls = {
        "softmax(x, -1)": (lambda: ops.softmax(x, -1), lambda: torch.softmax(x, -1)),
        "log_softmax(x, -1)": (lambda: ops.log_softmax(x, -1), lambda: torch.log_softmax(x, -1)),
        "softmax_backward(dy, y, -1)": (
            lambda: ops.softmax_backward(dy, y, -1, y.dtype),
            lambda: torch._softmax_backward_data(dy, y, -1, y.dtype)),
        "max_dim(x, -1)": (lambda: tuple(ops.max_dim(x, -1)), lambda: tuple(torch.max(x, -1))),
        "prod_dim(x, -1)": (lambda: ops.prod_dim(x, -1), lambda: torch.prod(x, -1)),
    }
    failing = []
    for name, (gems, ref) in calls.items():
        want = ref()
        try:
            got = gems()
            print(f"  {name}: flag_gems {got}, torch {want}")
        except Exception as exc:  # noqa: BLE001 - the finding
            print(f"  {name}: flag_gems raises {type(exc).__name__}: {exc}; torch returns {want}")
            failing.append(name)
    try:  # the same through torch's dispatcher
        with flag_gems.use_gems():
            torch.softmax(x, -1)
        print("  torch.softmax(x, -1) under flag_gems.use_gems(): ok")
    except Exception as exc:  # noqa: BLE001
        print(f"  torch.softmax(x, -1) under flag_gems.use_gems(): {type(exc).__name__}: {exc}")
    if failing:
        print(f"REPRODUCED: {len(failing)} of {len(calls)} calls raise on a 0-d input: "
              f"{', '.join(failing)}")
        return 1
    print("NOT REPRODUCED: every call returns torch's result")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        sys.exit(2)
