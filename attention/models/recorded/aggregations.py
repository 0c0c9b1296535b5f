"""One table of ways to show a layer's attention as one matrix: one head, the mean or max over heads,
rollout, norm-based. The views pages draw (attention.models.recorded.views) are built on it.

`AGGREGATIONS` is the one list: key, label (what the picker shows and a URL keeps), formula (LaTeX
written from this module's parameters, so the screen says what the code does), the attention stacks it
applies to, what a cell holds, the longest input it is computed for, and the function that computes it.
Every function recomputes weights from q and k a chunk of query rows at a time
(attention.models.forward.recompute): nothing here holds all layers x heads x n x n weights at once.

Shapes: one layer's matrix (n, m); n query tokens, m key tokens (n = m for self-attention).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.forward.attention_stack import AttentionStack
from attention.models.forward.model_attention import STACKS, ModelAttention
from attention.models.forward.recompute import block_max, chunk_rows, row_chunks
from attention.models.recorded.contributions import transformed, value_norms

ROLLOUT_RESIDUAL = 0.5  # the share of the skip connection in attention rollout (Abnar & Zuidema 2020)


def _reduce_heads(s: AttentionStack, layer: int, reduce: Callable[[torch.Tensor], torch.Tensor],
                  block: int = 1, heads=None) -> np.ndarray:
    """reduce((h, r, keys) weights of `heads`, default all) -> (r, keys) over all query rows, a chunk at a
    time; with block > 1 only the maxima of block x block cells are kept (a long input's view never holds
    n x m values). Shapes: -> (ceil(n / block), ceil(m / block))."""
    out = np.zeros((-(-s.n_queries // block), -(-s.n_keys // block)), np.float32)
    n_heads = s.n_heads if heads is None else len(heads)
    for rows in row_chunks(s.n_queries, chunk_rows(n_heads, s.n_keys, multiple=block)):
        keys = s.keys_seen(rows)
        part = reduce(s.layer_weights(layer, rows=rows, keys=keys, heads=heads))  # (r, keys)
        if block > 1:
            part = block_max(part[None], block)[0]
        first = rows.start // block
        out[first:first + part.shape[0], :part.shape[1]] = part.cpu().numpy()
    return out


def mean_over_heads(s: AttentionStack, layer: int, block: int = 1) -> np.ndarray:
    """Shapes: -> (n, m), rows sum to 1 (block maxima when block > 1)."""
    return _reduce_heads(s, layer, lambda w: w.mean(0), block)


def max_over_heads(s: AttentionStack, layer: int, block: int = 1) -> np.ndarray:
    """Shapes: -> (n, m). Rows no longer sum to 1 (block maxima when block > 1)."""
    return _reduce_heads(s, layer, lambda w: w.amax(0), block)


def rollout(mean_weights: np.ndarray, residual: float = ROLLOUT_RESIDUAL) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): how much token i draws on input token j by layer l.

    Per layer A' = (1 - residual) * mean_heads(A) + residual * I (the skip connection), rows renormalised;
    then R_l = A'_l @ R_{l-1}, R_0 = A'_0. Shapes: mean_weights (L, n, n) -> (L, n, n), rows sum to 1.
    """
    a = np.asarray(mean_weights, dtype=np.float64)
    n = a.shape[-1]
    a = (1 - residual) * a + residual * np.eye(n)
    a /= a.sum(axis=-1, keepdims=True)
    out = np.empty_like(a)
    acc = np.eye(n)
    for layer in range(a.shape[0]):
        acc = a[layer] @ acc  # (n, n) @ (n, n)
        out[layer] = acc
    return out


def norm_weights(att: ModelAttention, layer: int, head: int | None = None) -> np.ndarray:
    """Norm-based attention (Kobayashi et al. 2020): ||alpha_ij f(x_j)||, with f(x_j) = v_j W_O.

    With `head`, the norm of that head's contribution alpha^h_ij v^h_j W_O^h; without, the norm of the
    sum over heads (what the layer actually adds to token i from token j).
    Shapes: -> (n, n). ValueError when the model's W_O was not found.
    """
    s = att.self_attn
    if head is not None:  # ||a f|| = a ||f||: attention.models.recorded.contributions, one definition
        return s.head_weights(layer, head) * value_norms(att, layer)[head][None, :]
    f = transformed(att, layer)  # (H, n, D) each head's transformed value vectors
    out = np.zeros((s.n_queries, s.n_keys), np.float32)
    for rows in row_chunks(s.n_queries, max(1, 4_000_000 // (s.n_keys * f.shape[-1]))):  # (r, m, D) per chunk
        keys = s.keys_seen(rows)
        alpha = s.layer_weights(layer, rows=rows, keys=keys).cpu().float()
        summed = torch.einsum("hij,hjD->ijD", alpha, f[:, :keys])  # (r, keys, D): the sum over heads
        out[rows, :keys] = torch.linalg.norm(summed, dim=-1).numpy()
    return out


@dataclass(frozen=True)
class Aggregation:
    """One way to show a layer's attention as a single matrix."""

    key: str  # the name code uses: "head", "mean", ...
    label: str  # what the "Show" picker displays, and so what a URL's ?agg= holds
    formula: str  # LaTeX, with this module's parameters written in
    stacks: tuple[str, ...]  # the attention stacks it is defined for
    value_name: str  # what a cell holds: "weight" or "norm"
    rows_sum_to_one: bool  # True when each row is a distribution (hiding tokens renormalises it)
    compute: Callable[[ModelAttention, int, int, str, int], np.ndarray]  # (att, layer, head, stack, block)
    # -> (n, m), or with block > 1 the maxima of block x block cells
    max_tokens: int | None = None  # longer inputs are refused with a message (cost grows as n^3 or n^2 D)
    plain: str = ""  # what it shows, in a sentence a first-year reads (the page says it under the formula)
    per_head: bool = False  # one head's matrix (the Head input applies), not the layer's


def _rollout_formula(residual: float) -> str:
    """Two lines: on one, a phone cut it at "R^(ℓ−1"."""
    return (rf"\begin{{aligned}} \tilde A^{{(\ell)}} &= \operatorname{{rownorm}}\!\left({1 - residual:g}\,"
            rf"\bar A^{{(\ell)}} + {residual:g}\, I\right) \\ R^{{(\ell)}} &= \tilde A^{{(\ell)}} R^{{(\ell-1)}}"
            rf" \end{{aligned}}")


def _one_head(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return _reduce_heads(att.attention_stack(stack), layer, lambda w: w[0], block, heads=[head])


def _mean(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return mean_over_heads(att.attention_stack(stack), layer, block)


def _max(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return max_over_heads(att.attention_stack(stack), layer, block)


def _rollout(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return pooled(rollout(np.stack([mean_over_heads(att.self_attn, i) for i in range(layer + 1)]))[layer], block)


def _head_norm(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return pooled(norm_weights(att, layer, head), block)


def _norm(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return pooled(norm_weights(att, layer), block)


def pooled(matrix: np.ndarray, block: int) -> np.ndarray:
    """The maxima of block x block cells. Shapes: (..., n, m) -> (..., ceil(n / block), ceil(m / block))."""
    if block == 1:
        return matrix
    return block_max(torch.from_numpy(np.ascontiguousarray(matrix, np.float32)), block).numpy()


AGGREGATIONS = {a.key: a for a in (
    Aggregation("head", "one head",
                r"A^{(\ell,h)} = \operatorname{softmax}\!\left(Q^{(\ell,h)} K^{(\ell,h)\top} / \sqrt{d_k}\right)",
                STACKS, "weight", True, _one_head, per_head=True,
                plain="One head's weights: each row is a query token, each column a key token it may look at."),
    Aggregation("head_norm", "one head, weighted norms ‖α f(x)‖",
                r"N^{(\ell,h)}_{ij} = \alpha^{(\ell,h)}_{ij}\, \big\lVert v^{(h)}_j W_O^{(h)} \big\rVert",
                ("self",), "norm", False, _head_norm, max_tokens=1024, per_head=True,
                plain="The same head, each weight times the size of what the key token hands over (Kobayashi et al. "
                      "2020): a token that gets weight but gives little, as a sink often does, comes out small. A "
                      "weight alone says where a head looks, not how much it takes."),
    Aggregation("mean", "mean over heads", r"\bar A^{(\ell)} = \tfrac{1}{H}\sum_h A^{(\ell,h)}", STACKS, "weight",
                True, _mean, plain="The average of the layer's heads: where the layer as a whole looks."),
    Aggregation("max", "max over heads", r"A^{(\ell)}_{\max} = \max_h A^{(\ell,h)}", STACKS, "weight", False, _max,
                plain="For each pair of tokens, the largest weight any head of the layer gives it."),
    Aggregation("rollout", "attention rollout", _rollout_formula(ROLLOUT_RESIDUAL), ("self",), "weight", True,
                _rollout, max_tokens=1024,
                plain="Attention followed through every layer up to this one (Abnar and Zuidema 2020): each layer's "
                      "mean weights, plus the part each token keeps of itself, multiplied layer after layer, so a "
                      "row says which input tokens the token at that layer has read from, directly or through "
                      "others."),
    Aggregation("norm", "norm-based ‖α f(x)‖",
                r"N^{(\ell)}_{ij} = \Big\lVert \sum_h \alpha^{(\ell,h)}_{ij}\, v^{(h)}_j W_O^{(h)} \Big\rVert",
                ("self",), "norm", False, _norm, max_tokens=1024,
                plain="How much each key token adds to each query's output (Kobayashi et al. 2020): its weight times "
                      "the size of what it hands over, so a token that gets weight but gives little comes out "
                      "small."),
)}


CONTRIBUTION_MEASURES = {"weights": "weights α", "norms": "weighted norms α‖f(x)‖"}  # what a "looks at" view reads
_AS_NORMS = {"head": "head_norm", "mean": "norm"}  # the same view read by weighted norms (Kobayashi et al. 2020)


def measure_of(how: str) -> str:
    """The measure ("weights" or "norms", CONTRIBUTION_MEASURES) an aggregation reads: a norm-valued one, norms."""
    return "norms" if how in AGGREGATIONS and AGGREGATIONS[how].value_name == "norm" else "weights"


def with_measure(how: str, measure: str) -> str:
    """The aggregation that shows what `how` shows (one head, or the layer's heads together) by `measure`:
    "head" <-> "head_norm", "mean" <-> "norm"; the others (max, rollout) read weights and become the mean's."""
    if measure not in CONTRIBUTION_MEASURES:
        raise ValueError(f"measure is one of {', '.join(CONTRIBUTION_MEASURES)}, not {measure!r}")
    one = how in AGGREGATIONS and AGGREGATIONS[how].per_head
    base = "head" if one else "mean"
    return _AS_NORMS[base] if measure == "norms" else base


def aggregate(att: ModelAttention, how: str, *, layer: int, head: int = 0, stack: str = "self",
              block: int = 1) -> np.ndarray:
    """The matrix one aggregation gives for one layer (0-based layer and head); with block > 1, the
    maxima of its block x block cells, computed without holding the whole matrix where it can.

    Shapes: -> (n, n) for self-attention, (t, n) for cross, (t, t) for decoder; divided by block.
    """
    if how not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {how!r}; choose one of {', '.join(AGGREGATIONS)}")
    agg = AGGREGATIONS[how]
    if stack not in agg.stacks:
        allowed = ", ".join(k for k, a in AGGREGATIONS.items() if stack in a.stacks)
        raise ValueError(f"{agg.label} is defined for self-attention only; choose {allowed}")
    att.check_head(layer, head, stack)
    n = att.attention_stack(stack).n_queries
    if agg.max_tokens is not None and n > agg.max_tokens:
        raise ValueError(f"{agg.label} is computed for up to {agg.max_tokens:,} tokens (its cost grows faster than "
                         f"n²); this text has {n:,}. Choose one head, the mean or the max, or a shorter text.")
    return agg.compute(att, layer, head, stack, block)


def attention_row(att: ModelAttention, token: int, *, layer: int, head: int | None = None) -> np.ndarray:
    """What one token attends to in one layer: one head's row, or the mean over heads (head None).

    Shapes: -> (n,), sums to 1.
    """
    w = att.self_attn.layer_weights(layer, rows=slice(token, token + 1))[:, 0].cpu().numpy()  # (H, n)
    return w.mean(axis=0) if head is None else w[head]
