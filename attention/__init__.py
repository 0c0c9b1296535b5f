"""Attention, step by step: every intermediate of the computation kept, for toy vectors and real models.

    >>> from attention import scaled_dot_product_attention
    >>> t = scaled_dot_product_attention(q, k, v)     # q (n, d_k), k (m, d_k), v (m, d_v)
    >>> t.scores, t.scaled, t.weights, t.output

This package never imports Streamlit: pages call into it, and so can a notebook.
"""

from attention.naming import head_name, head_words
from attention.toy.core import (
    attention_from_embeddings,
    attention_from_scores,
    entropy,
    project,
    scaled_dot_product_attention,
    softmax,
)
from attention.toy.lookup import hard_lookup, soft_lookup
from attention.toy.masks import causal_mask, combine_masks, padding_mask
from attention.toy.multihead import multi_head_attention
from attention.toy.positions import permutation_check, sinusoidal_positions
from attention.toy.scoring import METHODS, scored_attention
from attention.toy.trace import AttentionTrace, MultiHeadTrace

__all__ = [
    "AttentionTrace", "MultiHeadTrace", "METHODS", "attention_from_embeddings", "attention_from_scores",
    "causal_mask", "combine_masks", "entropy", "hard_lookup", "head_name", "head_words", "multi_head_attention",
    "padding_mask",
    "permutation_check", "project", "scaled_dot_product_attention", "scored_attention",
    "sinusoidal_positions", "soft_lookup", "softmax",
]
