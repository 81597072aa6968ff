#!/usr/bin/env python3
"""FlagGems 5.0.2: scaled_dot_product_attention accepts only head dims 16, 32, 64, 128, 256.

`flag_gems.ops.scaled_dot_product_attention` asserts `HEAD_DIM_K in {16, 32, 64, 128,
256}` and raises a bare AssertionError for any other head dim: 96 (Phi-3, for one), 80,
or an odd test size. torch computes them all. The script also checks grouped-query
attention (8 query heads over 2 key/value heads, head dim 64, `enable_gqa=True`) and
causal attention against torch, so a wrong head mapping would show here too.

Suite example (H100): every test_matches_reference[attention-flag_gems] example (drawn
head dims such as 33) and the relation key_value_permutation_invariance.

Exit status: 1 if the finding reproduces, 0 if not, 2 if this machine cannot run it.
"""

import platform
import sys
import traceback

import torch

#: torch.testing.assert_close's default (rtol, atol) per dtype.
TOLERANCE = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
             torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}


def environment(library):
    """Print the versions and the GPU; the library's import error ends the run (exit 2)."""
    import importlib
    from importlib import metadata

    import triton
    module = importlib.import_module(library)
    dist = {"flag_gems": "flag-gems", "liger_kernel": "liger-kernel"}[library]
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        version = getattr(module, "__version__", "unknown")
    cap = "".join(map(str, torch.cuda.get_device_capability()))
    print(f"python {platform.python_version()}, torch {torch.__version__}, triton "
          f"{triton.__version__}, {dist} {version}")
    print(f"device: {torch.cuda.get_device_name()} (sm_{cap})")
    return module


def compare(name, out, ref, rtol, atol):
    """Print the largest |out - ref| and the worst element against assert_close's bound
    atol + rtol * |ref| (NaN must be NaN, inf the same inf); return whether any element is
    outside it."""
    got, want = out.detach().cpu().double(), ref.detach().cpu().double()
    if got.shape != want.shape:
        print(f"  {name}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
        return True
    ok = torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    finite = torch.isfinite(got) & torch.isfinite(want)
    err = torch.where(finite, (got - want).abs(), torch.zeros_like(got))
    bad = int((~ok).sum())
    line = (f"  {name}: max |out - ref| = {float(err.max()) if err.numel() else 0.0:.3g}; "
            f"{bad} of {want.numel()} elements outside atol + rtol*|ref| "
            f"(rtol={rtol:g}, atol={atol:g})")
    if bad:
        excess = torch.where(ok, torch.full_like(err, -1.0),
                             torch.where(finite, err - (atol + rtol * want.abs()),
                                         torch.full_like(err, float("inf"))))
        i = int(torch.argmax(excess.reshape(-1)))
        o, r = got.reshape(-1)[i].item(), want.reshape(-1)[i].item()
        idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), want.shape)) if want.dim() else ()
        line += (f"; worst at {idx}: out={o!r}, ref={r!r}, |out-ref|={abs(o - r):.3g} > "
                 f"{atol + rtol * abs(r):.3g}")
    print(line)
    return bad > 0


def run(main):
    """Exit 1 if the finding reproduces, 0 if not, 2 if this machine cannot run it."""
    if not torch.cuda.is_available():
        print("no CUDA device: cannot run")
        sys.exit(2)
    try:
        sys.exit(1 if main() else 0)
    except SystemExit:
        raise
    except ImportError as exc:
        print(f"cannot import the library: {exc}")
        sys.exit(2)
    except Exception:  # noqa: BLE001 - an unexpected failure is not a reproduction
        traceback.print_exc()
        sys.exit(2)


def main():
    environment("flag_gems")
    from flag_gems import ops
    sdpa = torch.nn.functional.scaled_dot_product_attention
    found = False
    for heads, kv_heads, dim, causal in ((8, 8, 96, False), (8, 8, 80, True), (8, 2, 64, False),
                                         (8, 2, 64, True), (8, 8, 128, True)):
        gen = torch.Generator().manual_seed(dim + heads * kv_heads)
        q = torch.randn(2, heads, 300, dim, generator=gen).half().cuda()
        k, v = (torch.randn(2, kv_heads, 300, dim, generator=gen).half().cuda() for _ in "kv")
        gqa = heads != kv_heads
        ref = sdpa(q.float(), k.float(), v.float(), is_causal=causal, enable_gqa=gqa)
        name = f"heads {heads}/{kv_heads}, head dim {dim}, causal {causal}"
        try:
            out = ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - the finding
            print(f"  {name}: {type(exc).__name__} {exc}")
            found = True
            continue
        found |= compare(name, out, ref, 2e-3, 2e-3)
    print("REPRODUCED: head dims outside {16, 32, 64, 128, 256} (or the checked cases) fail"
          if found else "NOT REPRODUCED")
    return found


if __name__ == "__main__":
    run(main)
