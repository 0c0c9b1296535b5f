"""Multi-head attention: h heads attend in parallel in their own subspaces, then W_O mixes them.

    head_i = Attention(X_q W_Q[:, i], X_kv W_K[:, i], X_kv W_V[:, i])
    MultiHead(X_q, X_kv) = concat(head_1, ..., head_h) W_O

Weights follow the papers' row-vector convention, Q = X W_Q with W_Q of shape (d_model, d_model);
the columns of head i are i*d_head .. (i+1)*d_head. (torch's nn.MultiheadAttention stores W^T.)
"""

from __future__ import annotations

import numpy as np

from attention.toy import examples as ex
from attention.toy.core import project, scaled_dot_product_attention
from attention.toy.trace import MultiHeadTrace, as_float_array


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """Shapes: (..., n, h * d_head) -> (..., h, n, d_head)"""
    *lead, n, d = x.shape
    return np.swapaxes(x.reshape(*lead, n, n_heads, d // n_heads), -2, -3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """Shapes: (..., h, n, d_head) -> (..., n, h * d_head), the heads side by side."""
    *lead, h, n, d = x.shape
    return np.swapaxes(x, -2, -3).reshape(*lead, n, h * d)


def multi_head_attention(
    x_q, x_kv, w_q, w_k, w_v, w_o, n_heads: int, *, mask=None,
    b_q=None, b_k=None, b_v=None, b_o=None,
) -> MultiHeadTrace:
    """Self-attention when x_kv is x_q (or None); cross (encoder-decoder) attention otherwise.

    Shapes: x_q (..., n, d_model), x_kv (..., m, d_model), w_q/w_k/w_v (d_model, d_model),
    w_o (d_model, d_model), mask broadcastable to (..., n, m) with True = may attend
    -> MultiHeadTrace: heads[i] with weights (..., n, m), concat and output (..., n, d_model).
    """
    x_q = as_float_array("x_q", x_q, min_ndim=2)
    x_kv = x_q if x_kv is None else as_float_array("x_kv", x_kv, min_ndim=2)
    if not isinstance(n_heads, (int, np.integer)) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive integer, got {n_heads!r}")
    d_inner = np.shape(w_q)[-1]
    if d_inner % n_heads:
        raise ValueError(f"W_Q has shape {np.shape(w_q)}: its {d_inner} columns do not split into {n_heads} heads")
    q = split_heads(project(x_q, w_q, b_q, name="W_Q"), n_heads)  # (..., h, n, d_head)
    k = split_heads(project(x_kv, w_k, b_k, name="W_K"), n_heads)  # (..., h, m, d_head)
    v = split_heads(project(x_kv, w_v, b_v, name="W_V"), n_heads)  # (..., h, m, d_head)
    if mask is not None:
        mask = np.asarray(mask)[..., None, :, :]  # same mask for every head
    stacked = scaled_dot_product_attention(q, k, v, mask=mask)  # weights (..., h, n, m)
    heads = tuple(stacked.head(i) for i in range(n_heads))
    concat = merge_heads(stacked.output)  # (..., n, h * d_head)
    output = project(concat, w_o, b_o, name="W_O")  # (..., n, d_model)
    return MultiHeadTrace(x_q=x_q, x_kv=x_kv, heads=heads, concat=concat, output=output)


def toy_translation(sharpness: float) -> MultiHeadTrace:
    """The seeds' toy translation (attention.toy.examples): the French words' queries read the English words'
    keys and values, one head, W_Q = W_K = sharpness * I and W_V = W_O = I over the meaning axes.

    Shapes: -> MultiHeadTrace with heads[0].weights (7 target words, 6 source words).
    """
    x_source, x_target = ex.translation_embeddings()
    eye = np.eye(x_source.shape[1])
    return multi_head_attention(x_target, x_source, sharpness * eye, sharpness * eye, eye, eye, 1)
