"""Scaled dot-product attention, FlashAttention-2 style: forward and backward.

``o = softmax(scale * q @ k^T + mask) @ v`` for q (B, H, Sq, D) and k, v (B, H_kv, Sk, D);
H_kv divides H (grouped-query attention: query head h reads key/value head h // (H / H_kv)).
Causal: query i sees key j where ``j <= i + causal_offset`` (0: torch's ``is_causal``, top
left; Sk - Sq: FlashAttention's bottom right); a query whose visible scores are all -inf
(it sees no key, or a -inf query) gets 0, as torch's scaled_dot_product_attention gives it
on the CPU and FlashAttention's kernels do.

Forward: a program owns BLOCK_M query rows of one (batch, head) and walks the keys in
BLOCK_N blocks with an online softmax (running max m and sum l, a float32 accumulator
rescaled by exp2(m_old - m_new)): the Sq x Sk scores are never stored. Scores are in base
2 (scale * log2(e) folded in); each row's base-2 log-sum-exp is stored (+inf for a row that
saw no key) so the backward recomputes p = exp2(s - lse), 0 for such a row. Key blocks every
row sees whole run unmasked, then the causal diagonal and the ragged end masked (select-load
profiles: the masked loop only); causal tiles stop at the last key their rows see. Backward
(FlashAttention-2, Algorithm 2): delta = rowsum(o * do); then a kernel per key block sums
dk, dv over the query blocks and the query heads of its key/value head (no atomics), and
one per query block sums dq over the key blocks: two launches of one kernel, or, where the
profile says (``tuning.attention.backward_single_launch``), a single launch of both kinds
of tile where all of them fit one program per compute unit.

Head dims that are not a power of two are padded to the next (at least 16, the smallest
``tl.dot``) with masks; lengths need not be multiples of the blocks. On select-load profiles
(SIMD NPUs) out-of-range rows and columns read the last valid one and are zeroed with a
select, as in kernels/matmul/kernels.py. The grid is 1-D over (batch x heads x blocks), capped at
MAX_GRID_NUM with a grid-stride loop beyond it, so no axis limit is reached whatever B * H
is. Tiles, num_warps and num_stages come from the profile's ``autotune.attention`` (BLOCK_M
x BLOCK_N) and ``autotune.attention_backward`` (BLOCK_M1 x BLOCK_N1 for dk/dv, BLOCK_M2 x
BLOCK_N2 for dq, as in Triton's tutorial 06): the first config whose tiles fit the
profile's shared memory (an estimate; the compile suite measures it against the limit).

The kernels and launchers are split where forward and backward divide:

- :mod:`.tiles`: the JIT helpers both sides use (masked or select loads of a tile and of
  per-row statistics, the causal mask, which key blocks need it);
- :mod:`.plan`: the host side both share: input checks, the profile's tile configs and the
  shared-memory estimate that picks among them;
- :mod:`.forward`: the forward kernel, ``attention_forward`` and ``attention``;
- :mod:`.backward`: the backward kernels (delta; dk/dv and dq) and their launchers;
- :mod:`.autograd`: the differentiable wrapper for gradcheck.

The launchers are exported here, so implementations are named ``kernels.attention:<name>``.
"""
from .autograd import AttentionFunction, attention_autograd
from .backward import attention_backward, attention_backward_from_saved
from .forward import attention, attention_forward
from .plan import DTYPES

__all__ = ["DTYPES", "AttentionFunction", "attention", "attention_autograd",
           "attention_backward", "attention_backward_from_saved", "attention_forward"]
