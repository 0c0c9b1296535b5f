"""Positions: self-attention alone does not know word order (seed 004), so positions are added.

    PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))      (Vaswani et al. 2017, section 3.5)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.toy.core import attention_from_embeddings


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
        """Shuffling the inputs only shuffled the outputs (to 1e-9)."""
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


@dataclass(frozen=True)
class OrderDemo:
    """One sentence, shuffled, through the same attention: with positions and without (the page's first
    section). Shapes: n tokens; weights (n, n), rows are queries."""

    tokens: tuple[str, ...]
    perm: np.ndarray  # (n,) shuffled sentence = tokens[perm]
    weights: np.ndarray  # (n, n) on the sentence as written
    weights_of_permuted: np.ndarray  # (n, n) on the shuffled sentence, its own order
    check: PermutationCheck

    @property
    def weights_unshuffled(self) -> np.ndarray:
        """(n, n) the shuffled sentence's weights put back in the written order: equal to `weights`
        exactly when attention ignores order."""
        inverse = np.argsort(self.perm)
        return self.weights_of_permuted[np.ix_(inverse, inverse)]

    @property
    def max_weight_change(self) -> float:
        """max |weights - weights_unshuffled|: 0 (to rounding) without positions."""
        return float(np.max(np.abs(self.weights - self.weights_unshuffled)))


def order_demo(tokens, x, w_q, w_k, w_v, perm, *, positions: bool) -> OrderDemo:
    """Attention on x and on x[perm], with sinusoidal positions (by slot, added after shuffling) or none.

    Shapes: x (n, d_model), perm (n,) -> OrderDemo.
    """
    x = np.asarray(x, dtype=np.float64)
    pe = sinusoidal_positions(len(x), x.shape[1]) if positions else None
    check = permutation_check(x, w_q, w_k, w_v, perm, positions=pe)
    add = 0.0 if pe is None else pe
    weights = attention_from_embeddings(x + add, w_q, w_k, w_v).weights
    weights_perm = attention_from_embeddings(x[check.perm] + add, w_q, w_k, w_v).weights
    return OrderDemo(tuple(tokens), check.perm, weights, weights_perm, check)


def shuffled_order(n: int, seed: int) -> np.ndarray:
    """(n,) a permutation of 0..n-1 that moves at least one token (for n > 1), the same for the same seed."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    while n > 1 and np.all(perm == np.arange(n)):
        perm = rng.permutation(n)
    return perm


def with_positions(x, w_q, w_k, w_v, *, base: float = 10000.0):
    """Self-attention on x + PE (sinusoidal, Vaswani et al.): the AttentionTrace a transformer's first layer
    starts from. Shapes: x (n, d_model)."""
    x = np.asarray(x, dtype=np.float64)
    return attention_from_embeddings(x + sinusoidal_positions(len(x), x.shape[1], base=base), w_q, w_k, w_v)


def position_similarity(n: int, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """(n, n) PE[p] . PE[p'] for sinusoidal positions: a function of p - p' alone,
    sum_i cos((p - p') w_i), largest at distance 0 and falling (not monotonically) with distance."""
    pe = sinusoidal_positions(n, d_model, base=base)
    return pe @ pe.T


# --- Rotary positions (RoPE; Su et al. 2021), as Llama and SmolLM2 apply them --------------------------
#
# q and k (not v), after their projections, inside every attention layer: dimension pair i = (x_i,
# x_{i + d/2}) is rotated by the angle p * θ_i, θ_i = base^(-2i/d). A rotation by p then by -p' leaves
# q_p . k_p' depending on p - p' only. The "split halves" pairing is transformers' rotate_half convention.

def rope_frequencies(d: int, *, base: float = 10000.0) -> np.ndarray:
    """(d/2,) θ_i = base^(-2i/d), radians per position; pair 0 turns fastest. d must be even."""
    if d < 2 or d % 2:
        raise ValueError(f"rotary positions need an even head dimension, got {d}")
    return base ** (-np.arange(0, d, 2) / d)


def rope(x, positions, *, base: float = 10000.0) -> np.ndarray:
    """Rotate each vector of x by its position. Shapes: x (..., n, d), positions (n,) -> (..., n, d).

    rope(rope(x, p), -p) == x, and rope(q, p) . rope(k, p') depends on p - p' only.
    """
    x = np.asarray(x, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    if positions.shape != x.shape[-2:-1]:
        raise ValueError(f"one position per vector: x {x.shape}, positions {positions.shape}")
    angle = positions[:, None] * rope_frequencies(x.shape[-1], base=base)[None, :]  # (n, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def rope_pair_terms(q, k) -> np.ndarray:
    """(d/2,) each frequency pair's part of q . k (q, k of shape (d,), rotated or not): sums to q . k."""
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    half = q.shape[-1] // 2
    return q[:half] * k[:half] + q[half:] * k[half:]


@dataclass(frozen=True)
class RotaryToy:
    """A 2-D query and key rotated by their positions (one pair, θ = `degrees_per_position`)."""

    q: np.ndarray  # (2,) before rotation
    k: np.ndarray  # (2,)
    query_position: int
    key_position: int
    degrees_per_position: float
    q_rotated: np.ndarray  # (2,)
    k_rotated: np.ndarray  # (2,)

    @property
    def score(self) -> float:
        """q_rotated . k_rotated = |q||k| cos(angle between them + (p_q - p_k) θ)."""
        return float(self.q_rotated @ self.k_rotated)

    @property
    def unrotated_score(self) -> float:
        """q . k before either is rotated."""
        return float(self.q @ self.k)

    @property
    def distance(self) -> int:
        """Query position minus key position: all a rotated score depends on."""
        return self.query_position - self.key_position


def rotary_toy(q, k, query_position: int, key_position: int, *, degrees_per_position: float = 30.0) -> RotaryToy:
    """Shapes: q (2,), k (2,). In 2-D, rope turns a vector by position x θ (d = 2: one pair)."""
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    step = np.deg2rad(degrees_per_position)  # rope's θ_0 is 1 radian per position; positions are scaled
    both = rope(np.stack([q, k]), np.array([query_position, key_position]) * step)
    return RotaryToy(q, k, query_position, key_position, degrees_per_position, both[0], both[1])
