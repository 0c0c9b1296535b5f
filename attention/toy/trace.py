"""The records every computation in this package returns: one frozen dataclass per kind of result.

An `AttentionTrace` holds every intermediate step of one attention computation, named as the math is
written, so a page (or a notebook) can show each step next to its formula:

    scores  = q @ k^T                      (match scores; score_terms(i) holds the d_k products of row i)
    scaled  = scores * scale, masked -> -inf    (soft-capped first, softcap * tanh(. / softcap), for models
                                                that cap their logits)
    weights = softmax(scaled)              (rows sum to 1; a fully masked row is all 0)
    output  = weights @ v                  (weighted_values(i) holds the terms alpha_ij v_j of row i)

The two per-row methods are TransformerLens's named steps made visible: the terms of each dot product
(what BertViz's neuron view draws) and the weighted values before they are summed (`hook_z` is their sum).

Shapes (leading batch / head axes `...` are allowed and shared by every field):
    q (..., n, d_k)   k (..., m, d_k)   v (..., m, d_v)
    scores, scaled, weights, mask (..., n, m)   output (..., n, d_v)   fully_masked (..., n)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class AttentionTrace:
    q: np.ndarray  # (..., n, d_k) queries (for additive attention d_q may differ from d_k)
    k: np.ndarray  # (..., m, d_k) keys
    v: np.ndarray  # (..., m, d_v) values
    scores: np.ndarray  # (..., n, m) raw scores before scaling (q @ k^T for dot-product methods)
    scale: float  # multiplier applied to the scores (1/sqrt(d_k) for scaled dot product)
    scaled: np.ndarray  # (..., n, m) scores * scale (soft-capped when softcap is set), masked positions -inf
    weights: np.ndarray  # (..., n, m) softmax over the last axis; masked positions exactly 0
    output: np.ndarray  # (..., n, d_v) weights @ v
    mask: np.ndarray | None = None  # (..., n, m) bool, True where a query may attend; None = all
    fully_masked: np.ndarray = field(default=None)  # (..., n) bool, rows with no key left to attend to
    method: str = "scaled_dot"  # name of the scoring function (see attention.toy.scoring.METHODS)
    softcap: float | None = None  # the cap c of c * tanh(s / c) applied to the scaled scores, if any

    @property
    def n_queries(self) -> int:
        return self.weights.shape[-2]

    @property
    def n_keys(self) -> int:
        return self.weights.shape[-1]

    @property
    def d_k(self) -> int:
        return self.k.shape[-1]

    def score_terms(self, i: int) -> np.ndarray:
        """The products q_ic * k_jc of query i with every key: row j sums to scores[..., i, j].

        Dot-product scoring only (the other methods do not score by a sum of products).
        Shapes: -> (..., m, d_k)
        """
        if self.method not in ("dot", "scaled_dot"):
            raise ValueError(f"{self.method} scores are not a sum of q_c k_c products")
        return self.q[..., i, None, :] * self.k  # (..., 1, d_k) * (..., m, d_k)

    def strongest_keys(self, i: int, k: int) -> np.ndarray:
        """Indices of the (at most) k keys with the largest weights in row i, in key order; masked keys
        (weight exactly 0) are never among them.

        Shapes: -> (<= k,) int
        """
        w = self.weights[..., i, :].reshape(-1, self.n_keys).max(axis=0)  # over any leading axes
        visible = np.flatnonzero(w > 0)
        if len(visible) <= k:
            return visible
        return np.sort(visible[np.argpartition(-w[visible], k - 1)[:k]])

    def weighted_values(self, i: int) -> np.ndarray:
        """alpha_ij * v_j for every key j: they sum over j to output[..., i, :].

        Shapes: -> (..., m, d_v)
        """
        return self.weights[..., i, :, None] * self.v  # (..., m, 1) * (..., m, d_v)

    def head(self, i: int) -> AttentionTrace:
        """The trace of entry i of the last leading axis (the head axis): `trace.head(3)`.

        Shapes: q (..., h, n, d_k) -> (..., n, d_k); weights (..., h, n, m) -> (..., n, m).
        """
        def pick(a, axis_from_end=3):
            return None if a is None else np.take(a, i, axis=a.ndim - axis_from_end)

        mask = None if self.mask is None else pick(np.broadcast_to(self.mask, self.weights.shape))
        return AttentionTrace(
            q=pick(self.q), k=pick(self.k), v=pick(self.v), scores=pick(self.scores), scale=self.scale,
            scaled=pick(self.scaled), weights=pick(self.weights), output=pick(self.output), mask=mask,
            fully_masked=pick(self.fully_masked, 2), method=self.method, softcap=self.softcap,
        )


@dataclass(frozen=True)
class MultiHeadTrace:
    """Multi-head attention: h independent heads, concatenated, then projected by W_O.

    Shapes: x_q (..., n, d_model), x_kv (..., m, d_model); each head's trace has d_head = d_model / h;
    concat (..., n, h * d_head); output (..., n, d_model); weights (..., h, n, m).
    """

    x_q: np.ndarray
    x_kv: np.ndarray
    heads: tuple[AttentionTrace, ...]  # one trace per head, leading axes of x kept
    concat: np.ndarray  # (..., n, h * d_head) the heads' outputs side by side
    output: np.ndarray  # (..., n, d_model) concat @ W_O (+ b_O)

    @property
    def n_heads(self) -> int:
        return len(self.heads)

    @property
    def weights(self) -> np.ndarray:
        """(..., h, n, m): every head's attention weights stacked on a head axis."""
        return np.stack([h.weights for h in self.heads], axis=-3)


def as_float_array(name: str, value, *, min_ndim: int = 1) -> np.ndarray:
    """`value` as a float64 array, refusing NaN/inf and too few axes with a message naming `name`."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric, got {type(value).__name__}: {err}") from None
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} axes, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values; attention needs finite numbers")
    return arr


def check_same(what: str, name_a: str, shape_a: tuple, name_b: str, shape_b: tuple, a: int, b: int):
    """Raise ValueError naming both shapes when two sizes that must agree do not."""
    if a != b:
        raise ValueError(
            f"{what}: {name_a} has shape {tuple(shape_a)} and {name_b} has shape {tuple(shape_b)}; "
            f"their {a} and {b} must be equal"
        )
