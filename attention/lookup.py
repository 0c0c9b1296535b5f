"""Hard lookup vs soft lookup (seed 002): a dictionary answers only the keys it holds; attention
answers any query with a blend of all values, weighted by how well each key matches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.core import scaled_dot_product_attention
from attention.scoring import scored_attention
from attention.trace import AttentionTrace


@dataclass(frozen=True)
class HardLookup:
    query: str
    found: bool
    value: float | None  # the stored value, None when the key is absent
    probabilities: dict  # key -> 1.0 for the exact match, 0.0 otherwise (all 0 when nothing matched)


def hard_lookup(table: dict, query: str) -> HardLookup:
    """Exact-match lookup: 'apple' -> 9 with probability 1; 'fruit' -> nothing."""
    key = query.strip().lower()
    found = key in table
    probs = {k: 1.0 if k == key else 0.0 for k in table}
    return HardLookup(query=query, found=found, value=table.get(key), probabilities=probs)


@dataclass(frozen=True)
class SoftLookup:
    labels: tuple[str, ...]  # one per key
    trace: AttentionTrace  # q (1, d_k), k (m, d_k), v (m, d_v), weights (1, m), output (1, d_v)
    winner: str  # the label with the largest weight

    @property
    def weights(self) -> np.ndarray:
        """(m,) the softmax weight of each key for the single query."""
        return self.trace.weights[0]


def soft_lookup(query, keys, values, labels, *, scaled: bool = True) -> SoftLookup:
    """Attention with one query over labelled key/value rows.

    Shapes: query (d_k,), keys (m, d_k), values (m, d_v), labels m strings -> SoftLookup.
    """
    labels = tuple(str(x) for x in labels)
    keys = np.asarray(keys, dtype=np.float64)
    if len(labels) != len(keys):
        raise ValueError(f"{len(labels)} labels for keys of shape {keys.shape}: need one label per key")
    q = np.atleast_2d(np.asarray(query, dtype=np.float64))  # (1, d_k)
    if scaled:
        trace = scaled_dot_product_attention(q, keys, values)
    else:
        trace = scored_attention(q, keys, values, "dot")
    winner = labels[int(np.argmax(trace.weights[0]))]
    return SoftLookup(labels=labels, trace=trace, winner=winner)
