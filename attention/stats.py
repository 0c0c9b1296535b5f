"""Summaries of a model's attention: aggregations over heads, rollout, norm-based weights, head statistics.

Shapes: weights (L, H, n, n) as in attention.extract.ModelAttention.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.core import entropy
from attention.extract import ModelAttention, is_punctuation

AGGREGATIONS = ("head", "mean", "max", "rollout", "norm")


def mean_over_heads(weights: np.ndarray) -> np.ndarray:
    """Shapes: (L, H, n, n) -> (L, n, n)"""
    return weights.mean(axis=1)


def max_over_heads(weights: np.ndarray) -> np.ndarray:
    """Shapes: (L, H, n, n) -> (L, n, n). Rows no longer sum to 1."""
    return weights.max(axis=1)


def rollout(weights: np.ndarray, residual: float = 0.5) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): how much token i draws on input token j by layer l.

    Per layer A' = (1 - residual) * mean_heads(A) + residual * I (the skip connection), rows renormalised;
    then R_l = A'_l @ R_{l-1}, R_0 = A'_0. Shapes: (L, H, n, n) -> (L, n, n), rows sum to 1.
    """
    a = mean_over_heads(weights).astype(np.float64)
    n = a.shape[-1]
    a = (1 - residual) * a + residual * np.eye(n)
    a /= a.sum(axis=-1, keepdims=True)
    out = np.empty_like(a)
    acc = np.eye(n)
    for layer in range(a.shape[0]):
        acc = a[layer] @ acc  # (n, n) @ (n, n)
        out[layer] = acc
    return out


def norm_weights(att: ModelAttention, w_o: np.ndarray | None, layer: int, head: int | None = None, *,
                 chunk: int = 64) -> np.ndarray:
    """Norm-based attention (Kobayashi et al. 2020): ||alpha_ij f(x_j)||, with f(x_j) = v_j W_O.

    With `head`, the norm of that head's contribution alpha^h_ij v^h_j W_O^h; without, the norm of the
    sum over heads (what the layer actually adds to token i from token j).
    Shapes: w_o (L, H * d, D) from LoadedModel.output_projections -> (n, n). ValueError if w_o is None.
    """
    if w_o is None:
        raise ValueError("this model's output projection W_O was not found, so norm-based weights are unavailable")
    s = att.self_attn
    n_heads, n_kv = s.weights.shape[1], s.v.shape[1]
    d = s.v.shape[-1]
    w_o = w_o[layer].reshape(n_heads, d, -1)  # (H, d, D): rows of W_O that read head h
    v = np.repeat(s.v[layer], n_heads // n_kv, axis=0)  # (H, n, d) with KV heads shared
    f = np.einsum("hjd,hdD->hjD", v, w_o)  # (H, n, D) each head's transformed value vectors
    alpha = s.weights[layer]  # (H, n, n)
    if head is not None:
        return alpha[head] * np.linalg.norm(f[head], axis=-1)[None, :]  # ||a f|| = a ||f|| for a >= 0
    n = alpha.shape[-1]
    out = np.empty((n, n), dtype=np.float32)
    for start in range(0, n, chunk):  # (chunk, n, D) at a time keeps memory small at 512 tokens
        summed = np.einsum("hij,hjD->ijD", alpha[:, start:start + chunk], f)
        out[start:start + chunk] = np.linalg.norm(summed, axis=-1)
    return out


def aggregate(att: ModelAttention, how: str, *, layer: int, head: int = 0, w_o=None,
              stack: str = "self") -> np.ndarray:
    """The matrix the pages show for one layer ("norm" needs the model's w_o).

    `stack` "cross" or "decoder" reads an encoder-decoder model's other attentions (head, mean, max only).
    Shapes: -> (n, n) for self-attention, (t, n) for cross, (t, t) for decoder.
    """
    weights = att.stack(stack).weights  # (L, H, rows, cols)
    if stack != "self" and how not in ("head", "mean", "max"):
        raise ValueError(f"{how} is defined for self-attention only; choose head, mean or max")
    if how == "head":
        return weights[layer, head]
    if how == "mean":
        return mean_over_heads(weights[layer:layer + 1])[0]
    if how == "max":
        return max_over_heads(weights[layer:layer + 1])[0]
    if how == "rollout":
        return rollout(att.weights[: layer + 1])[layer]
    if how == "norm":
        return norm_weights(att, w_o, layer)
    raise ValueError(f"unknown aggregation {how!r}; choose one of {', '.join(AGGREGATIONS)}")


def drop_tokens(matrix: np.ndarray, keep: np.ndarray, *, renormalise: bool = True) -> np.ndarray:
    """Hide some tokens (e.g. [CLS]/[SEP]) from rows and columns, and rescale rows to sum to 1.

    Shapes: matrix (..., n, n), keep (n,) bool -> (..., k, k) with k = keep.sum().
    """
    sub = matrix[..., keep, :][..., keep]
    if renormalise:
        total = sub.sum(axis=-1, keepdims=True)
        sub = np.divide(sub, total, out=np.zeros_like(sub), where=total > 0)
    return sub


# Clark et al. 2019, "What does BERT look at?": a head is of a type when over half its attention goes
# there on average (Section 3: previous/next token, [SEP]/[CLS]). "Broad" heads spread attention
# widely; the paper shows it through entropy, and we call a head broad when its mean entropy exceeds
# 90 % of the uniform entropy log(n) of the same rows (our threshold, stated in the atlas).
TYPE_THRESHOLD = 0.5
BROAD_FRACTION = 0.9


@dataclass(frozen=True)
class HeadStats:
    """Per (layer, head) averages over query rows. Shapes: every array (L, H)."""

    entropy: np.ndarray  # mean row entropy, nats
    uniform_entropy: float  # mean over rows of log(number of visible keys)
    special: np.ndarray  # share of attention on special tokens ([CLS], [SEP], BOS...), or on token 0
    previous: np.ndarray  # share on token i - 1
    same: np.ndarray  # share on token i itself
    next: np.ndarray  # share on token i + 1
    punctuation: np.ndarray  # share on punctuation tokens
    labels: np.ndarray  # (L, H) str: "previous-token", "next-token", "sink", "self", "broad" or ""


def head_statistics(att: ModelAttention) -> HeadStats:
    w = att.weights.astype(np.float64)  # (L, H, n, n)
    n = w.shape[-1]
    sink = att.special.copy()
    if not sink.any():  # decoders without BOS: the first token plays the sink role
        sink[0] = True
    ent = entropy(w).mean(axis=-1)
    visible = np.ones((n, n), bool) if att.self_attn.mask is None else att.self_attn.mask
    uniform = float(np.mean(np.log(np.maximum(visible.sum(-1), 1))))
    diag = lambda k: np.diagonal(w, offset=k, axis1=-2, axis2=-1)  # noqa: E731 - (L, H, n - |k|)
    rows = max(n - 1, 1)
    previous = diag(-1).sum(-1) / rows
    nxt = diag(1).sum(-1) / rows
    same = diag(0).mean(-1)
    special = w[..., sink].sum(-1).mean(-1)
    punct = np.array([is_punctuation(t) and not s for t, s in zip(att.tokens, att.special, strict=True)])
    punctuation = w[..., punct].sum(-1).mean(-1) if punct.any() else np.zeros(w.shape[:2])
    labels = np.full(w.shape[:2], "", dtype=object)
    labels[ent > BROAD_FRACTION * uniform] = "broad"
    for name, share in (("self", same), ("next-token", nxt), ("previous-token", previous), ("sink", special)):
        labels[share > TYPE_THRESHOLD] = name
    return HeadStats(entropy=ent, uniform_entropy=uniform, special=special, previous=previous, same=same,
                     next=nxt, punctuation=punctuation, labels=labels.astype(str))


def token_distribution_shift(a_tokens, a_weights: np.ndarray, b_tokens, b_weights: np.ndarray) -> np.ndarray:
    """Total-variation distance between two attention rows compared over token *strings*, per head.

    The two sentences may differ in length, so weights are summed per distinct token string first.
    Shapes: a_weights (..., n_a), b_weights (..., n_b) -> (...) in [0, 1].
    """
    vocab = sorted(set(a_tokens) | set(b_tokens))
    index = {t: i for i, t in enumerate(vocab)}

    def per_string(tokens, weights):
        out = np.zeros(weights.shape[:-1] + (len(vocab),))
        for j, t in enumerate(tokens):
            out[..., index[t]] += weights[..., j]
        return out

    return 0.5 * np.abs(per_string(a_tokens, a_weights) - per_string(b_tokens, b_weights)).sum(-1)


def cosine_per_layer(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of two tokens' hidden vectors at each layer. Shapes: (L + 1, D) x2 -> (L + 1,)"""
    num = np.sum(a * b, axis=-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)
