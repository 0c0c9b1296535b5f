"""Positions: self-attention alone does not know word order (seed 004), so positions are added.

    PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))      (Vaswani et al. 2017, section 3.5)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.core import attention_from_embeddings


def sinusoidal_positions(n: int, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """Shapes: -> (n, d_model). Even columns sin, odd columns cos; d_model may be odd."""
    if n < 0 or d_model < 1:
        raise ValueError(f"need n >= 0 and d_model >= 1, got n={n}, d_model={d_model}")
    pos = np.arange(n)[:, None]  # (n, 1)
    i = np.arange(0, d_model, 2)[None, :]  # (1, ceil(d/2))
    angle = pos / base ** (i / d_model)  # (n, ceil(d/2))
    pe = np.zeros((n, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return pe


@dataclass(frozen=True)
class PermutationCheck:
    """Self-attention on shuffled input gives the shuffled output: out(x[perm]) == out(x)[perm]."""

    perm: np.ndarray  # (n,) the shuffle applied to the tokens
    output: np.ndarray  # (n, d_v) attention output on x
    output_of_permuted: np.ndarray  # (n, d_v) attention output on x[perm]
    max_abs_diff: float  # max |output[perm] - output_of_permuted|; ~1e-16 without positions

    @property
    def equivariant(self) -> bool:
        return self.max_abs_diff < 1e-9


def permutation_check(x, w_q, w_k, w_v, perm, *, positions=None) -> PermutationCheck:
    """Compare attention on x and on x[perm]. With `positions` (n, d_model) added after shuffling,
    the equality breaks: that is why transformers add positional encodings.

    Shapes: x (n, d_model), perm (n,) -> PermutationCheck.
    """
    x = np.asarray(x, dtype=np.float64)
    perm = np.asarray(perm)
    if sorted(perm.tolist()) != list(range(len(x))):
        raise ValueError(f"perm must be a permutation of 0..{len(x) - 1}, got {perm.tolist()}")
    pos = 0.0 if positions is None else np.asarray(positions, dtype=np.float64)
    out = attention_from_embeddings(x + pos, w_q, w_k, w_v).output
    out_perm = attention_from_embeddings(x[perm] + pos, w_q, w_k, w_v).output
    diff = float(np.max(np.abs(out[perm] - out_perm)))
    return PermutationCheck(perm=perm, output=out, output_of_permuted=out_perm, max_abs_diff=diff)
