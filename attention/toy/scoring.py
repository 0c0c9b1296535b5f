"""Scoring functions: how much does query i match key j? Every method returns the same AttentionTrace.

| name           | score(q, k)                      | who                        |
| -------------- | -------------------------------- | -------------------------- |
| dot            | q . k                            | Luong et al. 2015 ("dot")  |
| scaled_dot     | q . k / sqrt(d_k)                | Vaswani et al. 2017        |
| multiplicative | q^T W k                          | Luong et al. 2015 ("general") |
| reduced_rank   | q^T U^T V k  = (U q) . (V k)     | low-rank W = U^T V (CS224n) |
| additive       | v_a^T tanh(W_1 q + W_2 k)        | Bahdanau et al. 2015       |

Only scaled_dot divides by sqrt(d_k); the others use scale 1, so `trace.scaled == trace.scores`.
"""

from __future__ import annotations

import math

import numpy as np

from attention.toy.core import attention_from_scores, check_qkv
from attention.toy.trace import AttentionTrace, as_float_array, check_same

METHODS = ("dot", "scaled_dot", "multiplicative", "reduced_rank", "additive")

FORMULAS = {  # LaTeX, for pages and plots
    "dot": r"e_{ij} = q_i^\top k_j",
    "scaled_dot": r"e_{ij} = \frac{q_i^\top k_j}{\sqrt{d_k}}",
    "multiplicative": r"e_{ij} = q_i^\top W k_j",
    "reduced_rank": r"e_{ij} = q_i^\top U^\top V k_j",
    "additive": r"e_{ij} = v_a^\top \tanh(W_1 q_i + W_2 k_j)",
}


def _swap(a):
    return np.swapaxes(a, -1, -2)


def scored_attention(
    q, k, v, method: str = "scaled_dot", *, w=None, u=None, w_v=None, w1=None, w2=None, v_a=None, mask=None
) -> AttentionTrace:
    """Attention with a named scoring function; parameters are only those the method uses.

    Shapes: q (..., n, d_q), k (..., m, d_k), v (..., m, d_v); mask broadcastable to (..., n, m).
      multiplicative: w (d_q, d_k)
      reduced_rank:   u (r, d_q), w_v (r, d_k)            (the "U" and "V" of q^T U^T V k)
      additive:       w1 (d_a, d_q), w2 (d_a, d_k), v_a (d_a,)
    -> AttentionTrace with scores (..., n, m).
    """
    if method not in METHODS:
        raise ValueError(f"unknown scoring method {method!r}; choose one of {', '.join(METHODS)}")
    q, k, v = check_qkv(q, k, v, same_dim=method in ("dot", "scaled_dot"))
    scale = 1.0
    if method in ("dot", "scaled_dot"):
        scores = q @ _swap(k)  # (..., n, d) @ (..., d, m) -> (..., n, m)
        if method == "scaled_dot":
            scale = 1.0 / math.sqrt(q.shape[-1])
    elif method == "multiplicative":
        w = _param("W", w, 2)
        check_same("q^T W k", "q", q.shape, "W", w.shape, q.shape[-1], w.shape[0])
        check_same("q^T W k", "W", w.shape, "k", k.shape, w.shape[1], k.shape[-1])
        scores = (q @ w) @ _swap(k)  # (..., n, d_q) @ (d_q, d_k) @ (..., d_k, m)
    elif method == "reduced_rank":
        u, w_v = _param("U", u, 2), _param("V", w_v, 2)
        check_same("U q", "U", u.shape, "q", q.shape, u.shape[1], q.shape[-1])
        check_same("V k", "V", w_v.shape, "k", k.shape, w_v.shape[1], k.shape[-1])
        check_same("(U q) . (V k)", "U", u.shape, "V", w_v.shape, u.shape[0], w_v.shape[0])
        scores = (q @ u.T) @ _swap(k @ w_v.T)  # (..., n, r) @ (..., r, m)
    else:  # additive
        w1, w2, v_a = _param("W_1", w1, 2), _param("W_2", w2, 2), _param("v_a", v_a, 1)
        check_same("W_1 q", "W_1", w1.shape, "q", q.shape, w1.shape[1], q.shape[-1])
        check_same("W_2 k", "W_2", w2.shape, "k", k.shape, w2.shape[1], k.shape[-1])
        check_same("W_1 q + W_2 k", "W_1", w1.shape, "W_2", w2.shape, w1.shape[0], w2.shape[0])
        check_same("v_a^T tanh(.)", "v_a", v_a.shape, "W_1", w1.shape, v_a.shape[0], w1.shape[0])
        hq = q @ w1.T  # (..., n, d_a)
        hk = k @ w2.T  # (..., m, d_a)
        energy = np.tanh(hq[..., :, None, :] + hk[..., None, :, :])  # (..., n, m, d_a)
        scores = energy @ v_a  # (..., n, m)
    return attention_from_scores(q, k, v, scores, scale, mask=mask, method=method)


def _param(name: str, value, ndim: int) -> np.ndarray:
    if value is None:
        raise ValueError(f"this scoring method needs the parameter {name}")
    arr = as_float_array(name, value, min_ndim=ndim)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {arr.shape}")
    return arr
