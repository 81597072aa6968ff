#!/usr/bin/env python3
"""FlagGems 5.0.2: native_layer_norm_backward treats every input as 2-D with rows along dim 0:
for an input of another rank it returns wrong gradients and writes past the end of
dweight and dbias.

layer_norm_backward takes `M = input.shape[0]; N = input.numel() // M` instead of the
normalized shape's size. For a (B, T, C) input, as transformers pass it through autograd,
it normalises rows of T * C elements: dx is wrong, and weight_bias_backward_kernel stores
T * C values into dweight and dbias of C elements (an out-of-bounds write into whatever
memory follows them). For a 1-D input of C elements it sees C rows of one element and
reads C means and rstds where there is one.

Suite examples: shape (1, 291, 5) float16 (large_offset, strided): "a kernel wrote past the
end of a torch.float16 buffer of shape (5,): 1450 of the 32768 guard elements after it
changed"; shape (1, 31, 7) float16: 210 guard elements changed; shape (205,) float32
(a row of -inf among normal values): dbias NaN in 204 of 205 elements.

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


class GuardedEmptyLike:
    """torch.empty_like, for the duration of the call, returns buffers followed by a guard
    of NaN, so a store past the end of one shows."""

    def __init__(self, guard=4096):
        self.guard, self.buffers, self.original = guard, [], torch.empty_like

    def __enter__(self):
        def empty_like(t, *args, dtype=None, device=None, **kwargs):
            dtype, device = dtype or t.dtype, device or t.device
            buf = torch.full((t.numel() + self.guard,), float("nan"), dtype=dtype, device=device)
            self.buffers.append((buf, t.numel(), tuple(t.shape)))
            return buf[:t.numel()].view(t.shape)
        torch.empty_like = empty_like
        return self

    def __exit__(self, *exc):
        torch.empty_like = self.original

    def overwritten(self):
        return [(shape, int((~torch.isnan(buf[n:])).sum())) for buf, n, shape in self.buffers]


def grads(x, w, b, dy, eps=1e-5):
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = torch.nn.functional.layer_norm(xr, x.shape[-1:], wr, br, eps)
    return torch.autograd.grad(y, (xr, wr, br), dy)


def main():
    import flag_gems
    environment("flag_gems")
    from flag_gems import ops
    eps, bad = 1e-5, False
    gen = torch.Generator().manual_seed(0)
    for shape, dtype in (((1, 291, 5), torch.float16), ((2, 3, 5), torch.float32),
                         ((5,), torch.float32)):
        n = shape[-1]
        x, dy = torch.randn(shape, generator=gen).to(dtype), torch.randn(shape, generator=gen).to(dtype)
        w, b = torch.randn(n, generator=gen).to(dtype), torch.randn(n, generator=gen).to(dtype)
        _, mean, rstd = torch.native_layer_norm(x.float(), (n,), w.float(), b.float(), eps)
        refs = grads(x.double(), w.double(), b.double(), dy.double(), eps)
        with GuardedEmptyLike() as guarded:
            outs = ops.layer_norm_backward(dy.cuda(), x.cuda(), (n,), mean.reshape(-1).cuda(),
                                           rstd.reshape(-1).cuda(), w.cuda(), b.cuda(),
                                           output_mask=[True, True, True])
            torch.cuda.synchronize()
        print(f"input {tuple(shape)} {str(dtype).removeprefix('torch.')}, normalised over the last dim ({n}):")
        for name, out, r in zip(("dx", "dweight", "dbias"), outs, refs):
            bad |= compare(name, out, r, *TOLERANCE[dtype])
        for buf_shape, changed in guarded.overwritten():
            if changed:
                print(f"  a kernel wrote {changed} elements past the end of a buffer of shape {buf_shape}")
                bad = True
    # the same through autograd, which passes the (B, T, C) input as it is
    try:
        x = torch.randn(2, 3, 5, generator=gen).cuda().requires_grad_()
        w, b = torch.randn(5, generator=gen).cuda(), torch.randn(5, generator=gen).cuda()
        dy = torch.randn(2, 3, 5, generator=gen).cuda()
        with flag_gems.use_gems():
            y = torch.nn.functional.layer_norm(x, (5,), w, b, eps)
            (dx,) = torch.autograd.grad(y, x, dy)
        want = grads(x.detach().cpu().double(), w.cpu().double(), b.cpu().double(), dy.cpu().double(), eps)[0]
        print("through torch.nn.functional.layer_norm and autograd under flag_gems.use_gems():")
        compare("dx", dx, want, *TOLERANCE[torch.float32])
    except Exception as exc:  # noqa: BLE001 - informational
        print(f"  (autograd under flag_gems.use_gems() did not run: {type(exc).__name__}: {exc})")
    print("REPRODUCED: gradients of inputs that are not 2-D are wrong" if bad else "NOT REPRODUCED")
    return bad


if __name__ == "__main__":
    run(main)
