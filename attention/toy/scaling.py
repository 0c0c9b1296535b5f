"""Why divide by sqrt(d_k): for q, k with independent unit-variance entries, Var(q . k) = d_k, so the
scores spread out as d_k grows and softmax saturates onto one key; q . k / sqrt(d_k) keeps variance 1.

Names as in AttentionTrace: `scores` = q . k, `scaled` = q . k / sqrt(d); weights "unscaled" come from
softmax(scores / T), weights "scaled" from softmax(scaled / T).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attention.toy.core import entropy, softmax

DIMS = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])  # the dimensions the study sweeps


@dataclass(frozen=True)
class ScalingSample:
    """One random query against n_keys random keys of dimension d."""

    d: int
    scores: np.ndarray  # (n_keys,) q . k_j
    scaled: np.ndarray  # (n_keys,) q . k_j / sqrt(d)
    weights_unscaled: np.ndarray  # (n_keys,) softmax(scores / temperature)
    weights_scaled: np.ndarray  # (n_keys,) softmax(scaled / temperature)


@dataclass(frozen=True)
class ScalingStudy:
    """Averages over many random draws, per dimension d."""

    dims: np.ndarray  # (D,)
    var_scores: np.ndarray  # (D,) empirical Var(q . k) ~ d
    var_scaled: np.ndarray  # (D,) ~ 1
    entropy_unscaled: np.ndarray  # (D,) mean entropy of softmax(scores / T), nats
    entropy_scaled: np.ndarray  # (D,) mean entropy of softmax(scaled / T), nats
    max_weight_unscaled: np.ndarray  # (D,) mean of the largest weight (1 = saturated)
    max_weight_scaled: np.ndarray  # (D,)
    n_keys: int
    draws: int  # random draws (a query and n_keys keys each) averaged at every d

    @property
    def uniform_entropy(self) -> np.ndarray:
        """(D,) log(n_keys): the entropy of uniform weights, the largest possible (same for every d)."""
        return np.full(len(self.dims), math.log(self.n_keys))


def scaling_sample(d: int, *, n_keys: int = 8, temperature: float = 1.0, seed: int = 0) -> ScalingSample:
    """Shapes: -> vectors of length n_keys."""
    if d < 1 or n_keys < 1:
        raise ValueError(f"need d >= 1 and n_keys >= 1, got d={d}, n_keys={n_keys}")
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(d)  # (d,)
    k = rng.standard_normal((n_keys, d))  # (n_keys, d)
    scores = k @ q
    scaled = scores / math.sqrt(d)
    return ScalingSample(d=d, scores=scores, scaled=scaled, weights_unscaled=softmax(scores, temperature=temperature),
                         weights_scaled=softmax(scaled, temperature=temperature))


def scaling_study(dims=DIMS, *, n_keys: int = 8, n_draws: int = 200, temperature: float = 1.0,
                  seed: int = 0) -> ScalingStudy:
    """Shapes: dims (D,) -> ScalingStudy with (D,) curves."""
    rng = np.random.default_rng(seed)
    dims = np.asarray(dims, dtype=int)
    rows = []
    for d in dims:
        q = rng.standard_normal((n_draws, 1, d))  # (draws, 1, d)
        k = rng.standard_normal((n_draws, n_keys, d))  # (draws, n_keys, d)
        scores = np.sum(q * k, axis=-1)  # (draws, n_keys)
        scaled = scores / math.sqrt(d)
        w_unscaled = softmax(scores, temperature=temperature)
        w_scaled = softmax(scaled, temperature=temperature)
        rows.append((scores.var(), scaled.var(), entropy(w_unscaled).mean(), entropy(w_scaled).mean(),
                     w_unscaled.max(-1).mean(), w_scaled.max(-1).mean()))
    cols = np.array(rows).T
    return ScalingStudy(dims=dims, var_scores=cols[0], var_scaled=cols[1], entropy_unscaled=cols[2],
                        entropy_scaled=cols[3], max_weight_unscaled=cols[4], max_weight_scaled=cols[5],
                        n_keys=n_keys, draws=n_draws)
