"""A softmax that is not shift invariant, planted for the relations suite (load with
``--impl softmax=tests.planted.relation_faults:softmax_scaled_by_row_mean``): it scales
each row by a factor that depends on the row's mean, which a shift changes. Near mean 0
it is close to softmax, so only the relation exposes it."""
import torch

from kernels.softmax import softmax


def softmax_scaled_by_row_mean(x, *, profile):
    mean = x.float().mean(dim=-1, keepdim=True)
    scaled = (x.float() * (1.0 + 0.05 * torch.tanh(mean))).to(x.dtype)
    return softmax(scaled, profile=profile)
