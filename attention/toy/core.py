"""Scaled dot-product attention, step by step, in numpy.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V        (Vaswani et al. 2017)

`scaled_dot_product_attention` returns an `AttentionTrace` holding every step; the other scoring
functions (attention.toy.scoring) share `attention_from_scores`, so every variant is masked, normalised and
recorded the same way.
"""

from __future__ import annotations

import math

import numpy as np

from attention.toy.trace import AttentionTrace, as_float_array, check_same


def softmax(x, *, axis: int = -1, temperature: float = 1.0) -> np.ndarray:
    """Numerically stable softmax of x / temperature; -inf entries get weight exactly 0.

    A slice that is entirely -inf (a fully masked row) becomes all zeros, never NaN.
    Shapes: x (...) -> (...), same shape.
    """
    if not temperature > 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a positive finite number, got {temperature}")
    x = np.asarray(x, dtype=np.float64) / temperature
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max = np.where(np.isfinite(x_max), x_max, 0.0)  # rows of all -inf: subtract nothing
    e = np.exp(x - x_max)  # exp(-inf) == 0 exactly; the largest entry is exp(0) == 1: no overflow
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def entropy(weights, *, axis: int = -1) -> np.ndarray:
    """Shannon entropy in nats of each attention row, with 0 * log 0 = 0.

    Uniform attention over m keys gives log(m); attention on one key gives 0.
    Shapes: weights (..., m) -> (...)
    """
    w = np.asarray(weights, dtype=np.float64)
    logs = np.log(w, out=np.zeros_like(w), where=w > 0)
    return -np.sum(w * logs, axis=axis)


def attention_from_scores(q, k, v, scores, scale: float, *, mask=None, method: str,
                          softcap: float | None = None) -> AttentionTrace:
    """Scale, mask, softmax and mix the values: the steps every scoring method shares. `softcap` c (a model
    that soft-caps its logits, Gemma-2) maps the scaled scores to c * tanh(s / c) before the mask.

    Shapes: q (..., n, d_q), k (..., m, d_k), v (..., m, d_v), scores (..., n, m),
    mask broadcastable to (..., n, m), True = may attend -> AttentionTrace.
    """
    scores = np.asarray(scores, dtype=np.float64)
    scaled = scores * scale
    if softcap is not None:
        scaled = softcap * np.tanh(scaled / softcap)
    fully_masked = np.zeros(scaled.shape[:-1], dtype=bool)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool:
            raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
        try:
            mask = np.broadcast_to(mask, scaled.shape)
        except ValueError:
            raise ValueError(
                f"mask has shape {mask.shape} and the scores have shape {scaled.shape}; "
                "the mask must broadcast to (..., n queries, m keys)"
            ) from None
        scaled = np.where(mask, scaled, -np.inf)
        fully_masked = ~np.any(mask, axis=-1)
    weights = softmax(scaled, axis=-1)
    output = weights @ v  # (..., n, m) @ (..., m, d_v) -> (..., n, d_v)
    return AttentionTrace(
        q=q, k=k, v=v, scores=scores, scale=float(scale), scaled=scaled, weights=weights,
        output=output, mask=mask, fully_masked=fully_masked, method=method, softcap=softcap,
    )


def check_qkv(q, k, v, *, same_dim: bool = True):
    """Validate q (..., n, d_q), k (..., m, d_k), v (..., m, d_v) and return them as float arrays."""
    q = as_float_array("q", q, min_ndim=2)
    k = as_float_array("k", k, min_ndim=2)
    v = as_float_array("v", v, min_ndim=2)
    if same_dim:
        check_same("q and k need the same feature size d_k", "q", q.shape, "k", k.shape, q.shape[-1], k.shape[-1])
    check_same("k and v need one value per key", "k", k.shape, "v", v.shape, k.shape[-2], v.shape[-2])
    if k.shape[-1] == 0 or q.shape[-1] == 0:
        raise ValueError(f"d_k must be at least 1, got q shape {q.shape} and k shape {k.shape}")
    if k.shape[-2] == 0:
        raise ValueError(f"there must be at least one key, got k shape {k.shape}")
    try:
        np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the leading (batch/head) axes of q {q.shape}, k {k.shape} and v {v.shape} do not broadcast"
        ) from None
    return q, k, v


def scaled_dot_product_attention(q, k, v, *, mask=None, scale: float | None = None,
                                 softcap: float | None = None) -> AttentionTrace:
    """softmax(q k^T * scale) v with every step kept; scale defaults to 1 / sqrt(d_k); `softcap` as in
    attention_from_scores.

    Shapes: q (..., n, d_k), k (..., m, d_k), v (..., m, d_v), mask broadcastable to (..., n, m)
    with True = may attend -> AttentionTrace with weights (..., n, m) and output (..., n, d_v).
    """
    q, k, v = check_qkv(q, k, v)
    d_k = q.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    elif not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")
    scores = q @ np.swapaxes(k, -1, -2)  # (..., n, d_k) @ (..., d_k, m) -> (..., n, m)
    return attention_from_scores(q, k, v, scores, scale, mask=mask, method="scaled_dot", softcap=softcap)


def project(x, w, b=None, *, name: str = "W") -> np.ndarray:
    """x @ W (+ b): one linear projection, as in Q = X W_Q.

    Shapes: x (..., n, d_model), w (d_model, d_out), b (d_out,) -> (..., n, d_out)
    """
    x = as_float_array("x", x, min_ndim=1)
    w = as_float_array(name, w, min_ndim=2)
    check_same(f"x @ {name}", "x", x.shape, name, w.shape, x.shape[-1], w.shape[0])
    out = x @ w
    if b is not None:
        b = as_float_array(f"bias of {name}", b)
        check_same(f"bias of {name}", name, w.shape, "bias", b.shape, w.shape[-1], b.shape[-1])
        out = out + b
    return out


def attention_from_embeddings(
    x_q, w_q, w_k, w_v, *, x_kv=None, b_q=None, b_k=None, b_v=None, mask=None, scale=None
) -> AttentionTrace:
    """Project embeddings to Q, K, V and attend: the seeds' six steps from the word vectors on.

    Q = X_q W_Q + b_Q, K = X_kv W_K + b_K, V = X_kv W_V + b_V; self-attention when x_kv is None.
    Shapes: x_q (..., n, d_model), x_kv (..., m, d_model), w_q/w_k (d_model, d_k), w_v (d_model, d_v)
    -> AttentionTrace with q (..., n, d_k), k (..., m, d_k), v (..., m, d_v).
    """
    x_kv = x_q if x_kv is None else x_kv
    q = project(x_q, w_q, b_q, name="W_Q")
    k = project(x_kv, w_k, b_k, name="W_K")
    v = project(x_kv, w_v, b_v, name="W_V")
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
