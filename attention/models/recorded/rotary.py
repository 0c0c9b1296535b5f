"""Rotary positions inside a real model: one head's query and key, before and after rotation.

Llama-style models (SmolLM2) rotate q and k, after their projections, by their positions
(attention.toy.positions.rope). The captured q and k (attention.models.forward.capture) are the rotated ones;
rotating back by -position recovers the projections, so every number here comes from the model's own
vectors and the base of its configuration (running.rotary_base).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.models.forward.model_attention import ModelAttention
from attention.toy.positions import rope, rope_frequencies, rope_pair_terms


@dataclass(frozen=True)
class RotaryView:
    """Shapes: d the head dimension; pairs d/2; D distances."""

    layer: int
    head: int
    query: int  # token index of the query (its position)
    key: int  # token index of the key
    base: float  # θ_i = base^(-2i/d)
    scale: float  # the model's score scaling, 1/sqrt(d)
    frequencies: np.ndarray  # (d/2,) radians per position, pair 0 fastest
    q_projected: np.ndarray  # (d,) before rotation
    k_projected: np.ndarray  # (d,)
    q_rotated: np.ndarray  # (d,) as the kernel multiplies it (the captured q)
    k_rotated: np.ndarray  # (d,)
    pair_terms_projected: np.ndarray  # (d/2,) each pair's share of q . k before rotation
    pair_terms_rotated: np.ndarray  # (d/2,) after: sums to the score the model uses (before scaling)
    distances: np.ndarray  # (D,) query position - key position, 0 upwards
    scores_by_distance: np.ndarray  # (D,) scaled score of the same two vectors placed that far apart

    @property
    def projected_score(self) -> float:
        """q . k / sqrt(d) without positions: what the score would be if rotation were skipped."""
        return float(self.q_projected @ self.k_projected * self.scale)

    @property
    def rotated_score(self) -> float:
        """q . k / sqrt(d) after rotation: the entry of the model's score matrix."""
        return float(self.q_rotated @ self.k_rotated * self.scale)

    @property
    def distance(self) -> int:
        """Query position minus key position."""
        return self.query - self.key


def rotary_view(att: ModelAttention, base: float, layer: int, head: int, query: int, key: int, *,
                max_distance: int = 256) -> RotaryView:
    """One head's (query, key) pair of `att` read through its rotary positions (self-attention).
    Positions are token indices 0..n-1, as the model counts them for one unpadded text."""
    att.check_head(layer, head)
    stack = att.self_attn
    n = stack.n_queries
    if not (0 <= query < n and 0 <= key < stack.n_keys):
        raise ValueError(f"query and key must be token indices below {n}, got {query}, {key}")
    q_rot = stack.q[layer, head, query].astype(np.float64)
    k_rot = stack.k[layer, stack.kv_head(head), key].astype(np.float64)
    q_proj = rope(q_rot[None], np.array([-query]), base=base)[0]
    k_proj = rope(k_rot[None], np.array([-key]), base=base)[0]
    distances = np.arange(max(max_distance, abs(query - key)) + 1)
    q_at = rope(np.repeat(q_proj[None], len(distances), 0), distances, base=base)  # key fixed at position 0
    scores = q_at @ k_proj * stack.scale_of(layer)
    return RotaryView(
        layer=layer, head=head, query=query, key=key, base=base, scale=stack.scale_of(layer),
        frequencies=rope_frequencies(len(q_rot), base=base),
        q_projected=q_proj, k_projected=k_proj, q_rotated=q_rot, k_rotated=k_rot,
        pair_terms_projected=rope_pair_terms(q_proj, k_proj), pair_terms_rotated=rope_pair_terms(q_rot, k_rot),
        distances=distances, scores_by_distance=scores,
    )
