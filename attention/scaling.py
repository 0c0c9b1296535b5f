"""Why divide by sqrt(d_k): for q, k with independent unit-variance entries, Var(q . k) = d_k, so raw
scores spread out as d_k grows and softmax saturates onto one key; q . k / sqrt(d_k) keeps variance 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attention.core import entropy, softmax


@dataclass(frozen=True)
class ScalingSample:
    """One random query against n_keys random keys of dimension d."""

    d: int
    raw: np.ndarray  # (n_keys,) q . k_j
    scaled: np.ndarray  # (n_keys,) q . k_j / sqrt(d)
    weights_raw: np.ndarray  # (n_keys,) softmax(raw / temperature)
    weights_scaled: np.ndarray  # (n_keys,) softmax(scaled / temperature)


@dataclass(frozen=True)
class ScalingStudy:
    """Averages over many random draws, per dimension d."""

    dims: np.ndarray  # (D,)
    var_raw: np.ndarray  # (D,) empirical Var(q . k) ~ d
    var_scaled: np.ndarray  # (D,) ~ 1
    entropy_raw: np.ndarray  # (D,) mean entropy of softmax(raw / T), nats
    entropy_scaled: np.ndarray  # (D,) mean entropy of softmax(scaled / T), nats
    max_weight_raw: np.ndarray  # (D,) mean of the largest weight (1 = saturated)
    max_weight_scaled: np.ndarray  # (D,)
    n_keys: int


def scaling_sample(d: int, *, n_keys: int = 8, temperature: float = 1.0, seed: int = 0) -> ScalingSample:
    """Shapes: -> vectors of length n_keys."""
    if d < 1 or n_keys < 1:
        raise ValueError(f"need d >= 1 and n_keys >= 1, got d={d}, n_keys={n_keys}")
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(d)  # (d,)
    k = rng.standard_normal((n_keys, d))  # (n_keys, d)
    raw = k @ q
    scaled = raw / math.sqrt(d)
    return ScalingSample(d=d, raw=raw, scaled=scaled, weights_raw=softmax(raw, temperature=temperature),
                         weights_scaled=softmax(scaled, temperature=temperature))


def scaling_study(dims, *, n_keys: int = 8, n_draws: int = 200, temperature: float = 1.0,
                  seed: int = 0) -> ScalingStudy:
    """Shapes: dims (D,) -> ScalingStudy with (D,) curves."""
    rng = np.random.default_rng(seed)
    dims = np.asarray(dims, dtype=int)
    rows = []
    for d in dims:
        q = rng.standard_normal((n_draws, 1, d))  # (draws, 1, d)
        k = rng.standard_normal((n_draws, n_keys, d))  # (draws, n_keys, d)
        raw = np.sum(q * k, axis=-1)  # (draws, n_keys)
        scaled = raw / math.sqrt(d)
        w_raw = softmax(raw, temperature=temperature)
        w_scaled = softmax(scaled, temperature=temperature)
        rows.append((raw.var(), scaled.var(), entropy(w_raw).mean(), entropy(w_scaled).mean(),
                     w_raw.max(-1).mean(), w_scaled.max(-1).mean()))
    cols = np.array(rows).T
    return ScalingStudy(dims=dims, var_raw=cols[0], var_scaled=cols[1], entropy_raw=cols[2],
                        entropy_scaled=cols[3], max_weight_raw=cols[4], max_weight_scaled=cols[5], n_keys=n_keys)
