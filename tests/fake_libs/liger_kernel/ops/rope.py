import torch

from _fake_lib_fault import planted


def rope_forward(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, rotary_dim=None):
    """q, k: [B, H, S, D] views of [B, S, H, D] storage, rotated in place (half-split,
    the first rotary_dim columns); cos, sin: [1, S, R], cat(freqs, freqs)."""
    for t in (q, k):
        rotary = rotary_dim or t.shape[-1]
        half = rotary // 2
        c, s = cos[:, None, :, :half].double(), sin[:, None, :, :half].double()
        x1, x2 = t[..., :half].double(), t[..., half:rotary].double()
        y1, y2 = x1 * c - x2 * s, x2 * c + x1 * s
        t[..., :half] = planted("rope_forward", y1).to(t.dtype)
        t[..., half:rotary] = y2.to(t.dtype)
    return q, k, cos, sin
