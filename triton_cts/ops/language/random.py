"""Random numbers of the Triton language, each a primitive op: ``tl.randint``,
``tl.rand`` and ``tl.randn`` at a seed and a block of offsets.

Triton defines them exactly (triton/language/random.py): Philox 4x32 with 10 rounds,
the counter (offset low word, offset high word for int64 offsets, 0, 0), the key (seed
low word, seed high word); ``randint`` is the first output word; ``rand`` maps it to
[0, 1) as ``(x < 0 ? ~x : x) * 4.6566127342e-10`` in float32 with x read as int32;
``randn`` is Box-Muller on the first two words. So the same seed and offsets give the
same bits on every target and in every mode (cross-vendor reproducible dropout):
:func:`philox` is a reference in numpy. ``randn`` goes through log, sqrt and cos, which
are approximations on GPUs: it is held to a tolerance, and whether it matched the
float32 reference bit for bit is recorded.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from triton_cts.ops.language import primitive_op

SUITE = "test_language_math"
ROUNDS = 10
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
#: uint_to_uniform_float's scale for 32-bit words (rounded to float32, as the kernel does)
UNIFORM_SCALE = 4.6566127342e-10


@dataclass(frozen=True)
class RandomPrimitive:
    """A random primitive: ``kind`` is "randint", "rand" or "randn"."""

    kind: str

    def __repr__(self) -> str:
        return f"RandomPrimitive({self.kind})"


def _make_args(x, gen):
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    return (x.abs(),), {"seed": seed}


OPS = tuple(primitive_op(
    name=f"tl_{kind}", suite=SUITE, primitive=RandomPrimitive(kind),
    description=f"tl.{kind}(seed, offsets): Philox 4x32-10, the same bits everywhere",
    reference=lambda offsets, seed, kind=kind: torch.from_numpy(reference(kind, seed, offsets)),
    reference_kernel=f"kernels.language.random:{kind}",
    dtypes=(torch.int32, torch.int64), make_args=_make_args, min_ndim=1, max_ndim=1,
    compile_shapes=((4096,),),
) for kind in ("randint", "rand", "randn"))


def _mulhilo(a: int, b):
    import numpy as np
    p = np.uint64(a) * b.astype(np.uint64)
    return (p >> np.uint64(32)) & np.uint64(0xFFFFFFFF), p & np.uint64(0xFFFFFFFF)


def philox(seed: int, offsets) -> tuple:
    """The four uint32 words Triton's ``randint4x(seed, offsets)`` returns (numpy arrays)."""
    import numpy as np
    _M32 = np.uint64(0xFFFFFFFF)
    offsets = np.asarray(offsets).astype(np.int64)
    seed %= 1 << 64
    c0 = (offsets.astype(np.uint64)) & _M32
    c1 = (offsets.astype(np.uint64) >> np.uint64(32)) & _M32 \
        if offsets.dtype.itemsize > 4 else np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    for _ in range(ROUNDS):
        hi_b, lo_b = _mulhilo(_ROUND_B, c2)
        hi_a, lo_a = _mulhilo(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0 = (k0 + np.uint64(_KEY_A)) & _M32
        k1 = (k1 + np.uint64(_KEY_B)) & _M32
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def uniform(words):
    """``uint_to_uniform_float``: int32 x, ~x where negative, times the scale, float32."""
    import numpy as np
    x = words.view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * np.float32(UNIFORM_SCALE)


def reference(kind: str, seed: int, offsets):
    """What ``tl.<kind>(seed, offsets)`` gives: randint's unsigned word as int64, rand as float32,
    randn as float64 (Box-Muller of the two float32 uniforms, exactly)."""
    import numpy as np
    offsets = offsets.numpy() if isinstance(offsets, torch.Tensor) else np.asarray(offsets)
    w0, w1, _, _ = philox(seed, offsets)
    if kind == "randint":
        return w0.astype(np.int64)
    if kind == "rand":
        return uniform(w0)
    u1 = np.maximum(np.float32(1e-7), uniform(w0)).astype(np.float64)
    th = np.float64(np.float32(6.283185307179586) * uniform(w1))
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(th)


def randn_float32(seed: int, offsets):
    """``randn`` computed step by step in float32 as the kernel's operations round (numpy's
    float32 log, sqrt and cos standing in for the target's)."""
    import numpy as np
    offsets = offsets.numpy() if isinstance(offsets, torch.Tensor) else np.asarray(offsets)
    w0, w1, _, _ = philox(seed, offsets)
    u1 = np.maximum(np.float32(1e-7), uniform(w0))
    th = np.float32(6.283185307179586) * uniform(w1)
    r = np.sqrt(np.float32(-2.0) * np.log(u1))
    return (r * np.cos(th)).astype(np.float32)
