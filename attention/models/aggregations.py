"""What the model pages draw: one table of aggregations over heads, and the views built on it.

`AGGREGATIONS` is the one list of ways to show a layer: key, label (what the picker shows and a URL
keeps), formula (LaTeX written from this module's parameters, so the screen says what the code does),
the attention stacks it applies to, what a cell holds, the longest input it is computed for, and the
function that computes it. Every function recomputes weights from q and k a chunk of query rows at a
time (attention.models.recompute): no view holds all layers x heads x n x n weights at once.

Shapes: one layer's matrix (n, m); n query tokens, m key tokens (n = m for self-attention).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.model_attention import STACKS, AttentionStack, ModelAttention
from attention.models.recompute import block_max, chunk_rows, row_chunks
from attention.models.words import WordGroups

ROLLOUT_RESIDUAL = 0.5  # the share of the skip connection in attention rollout (Abnar & Zuidema 2020)
MAX_SHOWN = 256  # larger matrices are shown as block maxima: at 512 tokens a cell would be ~2 px wide, too small
# to see or hover, and the 512 x 512 zoom alone made a 512-token sentence take 0.9-1.0 s to appear instead of ~0.7 s


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
    if s.w_o is None:
        raise ValueError("this model's output projection W_O was not found, so norm-based weights are unavailable")
    n_heads, n_kv, d = s.n_heads, s.v.shape[1], s.v.shape[-1]
    w_o = torch.from_numpy(np.ascontiguousarray(s.w_o[layer], dtype=np.float32)).reshape(n_heads, d, -1)  # (H, d, D)
    v = torch.from_numpy(np.repeat(s.v[layer], n_heads // n_kv, axis=0).astype(np.float32))  # (H, n, d), KV shared
    f = torch.einsum("hjd,hdD->hjD", v, w_o)  # (H, n, D) each head's transformed value vectors
    if head is not None:
        return s.head_weights(layer, head) * torch.linalg.norm(f[head], dim=-1).numpy()[None, :]  # ||a f|| = a ||f||
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


def _rollout_formula(residual: float) -> str:
    return (rf"\tilde A^{{(\ell)}} = \operatorname{{rownorm}}\!\left({1 - residual:g}\,\bar A^{{(\ell)}} + "
            rf"{residual:g}\, I\right),\quad R^{{(\ell)}} = \tilde A^{{(\ell)}} R^{{(\ell-1)}}")


def _one_head(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return _reduce_heads(att.attention_stack(stack), layer, lambda w: w[0], block, heads=[head])


def _mean(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return mean_over_heads(att.attention_stack(stack), layer, block)


def _max(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return max_over_heads(att.attention_stack(stack), layer, block)


def _rollout(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return _pooled(rollout(np.stack([mean_over_heads(att.self_attn, i) for i in range(layer + 1)]))[layer], block)


def _norm(att: ModelAttention, layer: int, head: int, stack: str, block: int) -> np.ndarray:
    return _pooled(norm_weights(att, layer), block)


def _pooled(matrix: np.ndarray, block: int) -> np.ndarray:
    if block == 1:
        return matrix
    return block_max(torch.from_numpy(np.ascontiguousarray(matrix, np.float32)), block).numpy()


AGGREGATIONS = {a.key: a for a in (
    Aggregation("head", "one head",
                r"A^{(\ell,h)} = \operatorname{softmax}\!\left(Q^{(\ell,h)} K^{(\ell,h)\top} / \sqrt{d_k}\right)",
                STACKS, "weight", True, _one_head),
    Aggregation("mean", "mean over heads", r"\bar A^{(\ell)} = \tfrac{1}{H}\sum_h A^{(\ell,h)}", STACKS, "weight",
                True, _mean),
    Aggregation("max", "max over heads", r"A^{(\ell)}_{\max} = \max_h A^{(\ell,h)}", STACKS, "weight", False, _max),
    Aggregation("rollout", "attention rollout", _rollout_formula(ROLLOUT_RESIDUAL), ("self",), "weight", True,
                _rollout, max_tokens=1024),
    Aggregation("norm", "norm-based ‖α f(x)‖",
                r"N^{(\ell)}_{ij} = \Big\lVert \sum_h \alpha^{(\ell,h)}_{ij}\, v^{(h)}_j W_O^{(h)} \Big\rVert",
                ("self",), "norm", False, _norm, max_tokens=1024),
)}


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


def without_keys(matrix: np.ndarray, gone: np.ndarray) -> np.ndarray:
    """Remove some keys (e.g. a head's sinks) from distributions: their weight set to 0, each row rescaled
    to sum to 1 (rows left with nothing stay 0). Shapes: matrix (..., m), gone (m,) bool -> (..., m)."""
    kept = np.where(np.asarray(gone, bool), 0.0, np.asarray(matrix, dtype=np.float64))
    total = kept.sum(axis=-1, keepdims=True)
    return np.divide(kept, total, out=np.zeros_like(kept), where=total > 0)


def drop_tokens(matrix: np.ndarray, keep: np.ndarray, *, renormalise: bool = True) -> np.ndarray:
    """Hide some tokens (e.g. [CLS]/[SEP]) from rows and columns, and rescale rows to sum to 1.

    Shapes: matrix (..., n, n), keep (n,) bool -> (..., k, k) with k = keep.sum().
    """
    sub = matrix[..., keep, :][..., keep]
    if renormalise:
        total = sub.sum(axis=-1, keepdims=True)
        sub = np.divide(sub, total, out=np.zeros_like(sub), where=total > 0)
    return sub


@dataclass(frozen=True)
class MatrixView:
    """A matrix ready to draw: its values, what its rows and columns are, and what it shows."""

    matrix: np.ndarray  # (rows, cols)
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    mask: np.ndarray | None  # (rows, cols) bool, True = may attend; None = all visible
    title: str
    value_name: str  # "weight" or "norm"
    zmax: float | None  # top of the colour scale: 1 for weights, None (the largest value) for norms
    row_ids: tuple[int, ...] | None = None  # which token (or word) each row is, when some were hidden; None: 0..n-1
    block: int = 1  # tokens per cell side: > 1 when the matrix is shown as block maxima


def pool_max(w: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """Max-pool the last two axes down to at most size x size, so thin lines (a diagonal) survive.

    Shapes: (..., n, m) -> ((..., ceil(n / b), ceil(m / b)), b) with b = ceil(max(n, m) / size).
    """
    n, m = w.shape[-2:]
    b = -(-max(n, m) // size)
    if b <= 1:
        return w, 1
    return _pooled(w.reshape(-1, n, m), b).reshape(*w.shape[:-2], -(-n // b), -(-m // b)), b


def _block_labels(tokens, b: int) -> tuple[str, ...]:
    """Labels of blocks of b tokens: "40–47 bank…" (first position, last position, first token)."""
    if b == 1:
        return tuple(tokens)
    return tuple(f"{i}–{min(i + b, len(tokens)) - 1} {tokens[i]}…" for i in range(0, len(tokens), b))


def zoom(att: ModelAttention, how: str, *, layer: int, head: int = 0, stack: str = "self",
         hide_special: bool = False, sinks: np.ndarray | None = None, words: WordGroups | None = None,
         max_shown: int = MAX_SHOWN) -> MatrixView:
    """One layer as one matrix (an aggregation), as it is or re-read three ways (self-attention only):

    - hide_special: drop [CLS]/[SEP]/BOS rows and columns;
    - sinks (n,) bool: remove those key columns (a head's attention sinks, HeadSurvey.sinks_of); they stay
      on screen as masked cells;
    - words: merge pieces into words (attention.models.words: columns summed, rows averaged).
    Distributions are renormalised to rows summing to 1 after hiding or removing. A matrix larger than
    max_shown per side comes back as block maxima, labelled by position ranges.
    """
    agg = AGGREGATIONS.get(how)
    rows, cols = att.query_tokens(stack), att.key_tokens(stack)
    mask = att.attention_stack(stack).mask
    title = f"Layer {layer + 1}, " + (f"head {head + 1}" if how == "head" else agg.label)
    if stack == "self" and (hide_special or sinks is not None or words is not None):
        matrix = aggregate(att, how, layer=layer, head=head, stack=stack)
        n = len(rows)
        keep = ~att.special if hide_special and (~att.special).any() else np.ones(n, bool)
        if sinks is not None:
            gone = np.asarray(sinks, bool) & keep
            matrix = without_keys(matrix, gone) if agg.rows_sum_to_one else np.where(gone[None, :], 0.0, matrix)
            mask = (np.ones((n, n), bool) if mask is None else mask) & ~gone[None, :]
            title += ", without its sinks" if how == "head" else ", without the layer's sinks"
        matrix = drop_tokens(matrix, keep, renormalise=agg.rows_sum_to_one and hide_special)
        mask = None if mask is None else mask[np.ix_(keep, keep)]
        rows = cols = tuple(t for t, k in zip(rows, keep, strict=True) if k)
        row_ids = tuple(int(i) for i in np.nonzero(keep)[0])
        if words is not None:
            groups = words.restricted(keep)
            matrix, mask, rows = groups.merge(matrix), groups.merge_mask(mask), groups.words
            cols = rows
            row_ids = tuple(a for a, group in enumerate(words.pieces) if any(keep[i] for i in group))
            title += ", words"
        matrix, b = pool_max(matrix, max_shown)
    else:  # block maxima straight from the chunks: a 4,096-token head never sits in memory whole
        row_ids = None
        b = -(-max(len(rows), len(cols)) // max_shown)
        matrix = aggregate(att, how, layer=layer, head=head, stack=stack, block=b)
    if b > 1:
        mask = None if mask is None else pool_max(mask.astype(np.float32), max_shown)[0] > 0
        title += f" (block maxima of {b}×{b})"
    return MatrixView(matrix=matrix, row_labels=_block_labels(rows, b), col_labels=_block_labels(cols, b), mask=mask,
                      title=title, value_name=agg.value_name, zmax=1.0 if agg.value_name == "weight" else None,
                      row_ids=row_ids if b == 1 else None, block=b)


def token_focus(att: ModelAttention, token: int, *, stack: str = "self", words: WordGroups | None = None,
                max_shown: int = MAX_SHOWN) -> MatrixView:
    """Where one query token looks in every head: one row per (layer, head), "L1 H1" first. With `words`,
    `token` is a word: its pieces' rows averaged, keys merged into words.

    Recomputes one row per head. Shapes: -> matrix (L * H, m), keys pooled to max_shown blocks if longer.
    """
    s = att.attention_stack(stack)
    queries = att.query_tokens(stack) if words is None else words.words
    if not 0 <= token < len(queries):
        raise ValueError(f"token {token} is outside the {len(queries)} {'tokens' if words is None else 'words'}")
    if words is None:
        rows = s.query_rows(token).reshape(s.n_layers * s.n_heads, -1)  # (L*H, m)
    else:
        pieces = words.pieces[token]
        rows = np.mean([s.query_rows(i) for i in pieces], axis=0).reshape(s.n_layers * s.n_heads, -1)
        rows = words.merge_columns(rows).astype(np.float32)
    b = -(-rows.shape[-1] // max_shown)
    if b > 1:  # block maxima along the keys only
        rows = torch.nn.functional.max_pool1d(torch.from_numpy(rows)[:, None], b, b, ceil_mode=True)[:, 0].numpy()
    labels = tuple(f"L{layer + 1} H{head + 1}" for layer in range(s.n_layers) for head in range(s.n_heads))
    keys = att.key_tokens(stack) if words is None else words.words
    visible = s.mask if words is None else words.merge_mask(s.mask)  # (queries, keys) bool or None
    mask = None if visible is None or b > 1 else np.broadcast_to(visible[token], rows.shape)
    return MatrixView(matrix=rows, row_labels=labels, col_labels=_block_labels(keys, b), mask=mask,
                      title=f"“{queries[token]}” as the query", value_name="weight", zmax=1.0)


def attention_row(att: ModelAttention, token: int, *, layer: int, head: int | None = None) -> np.ndarray:
    """What one token attends to in one layer: one head's row, or the mean over heads (head None).

    Shapes: -> (n,), sums to 1.
    """
    w = att.self_attn.layer_weights(layer, rows=slice(token, token + 1))[:, 0].cpu().numpy()  # (H, n)
    return w.mean(axis=0) if head is None else w[head]


LINE_VIEW_TOKENS = 30  # up to this many tokens every line is drawn; beyond, each query keeps its top weights
LINE_VIEW_TOP = 3
LINE_VIEW_MIN = 0.01  # lines under this weight are not drawn (they would be invisible anyway)
LINE_VIEW_MAX_UNITS = 120  # tokens (or words) beyond which the two columns of labels no longer fit a screen


@dataclass(frozen=True)
class LineView:
    """BertViz's "head view": tokens in two columns, a line from each query (left) to each key (right)
    whose opacity is the weight; one colour per head. Shapes: per head (k, 3) rows (query, key, weight)."""

    labels: tuple[str, ...]  # tokens (or words) of both columns
    heads: tuple[str, ...]  # "L3 H5", one per drawn head
    lines: tuple[np.ndarray, ...]  # per head: (k, 3) float rows (query index, key index, weight)
    query: int | None  # only this query's lines (None: all)
    top: int | None  # lines kept per query when thinned (None: all of at least LINE_VIEW_MIN)


def line_view(att: ModelAttention, layer: int, heads, *, query: int | None = None, words: WordGroups | None = None,
              top: int | None = None) -> LineView:
    """The lines of some heads of one layer (self-attention). Texts longer than LINE_VIEW_TOKENS keep
    each query's LINE_VIEW_TOP strongest keys unless `top` says otherwise; `query` keeps one query's lines;
    `words` merges pieces into words first (attention.models.words)."""
    heads = [int(h) for h in heads]
    labels = att.tokens if words is None else words.words
    n = len(labels)
    if n > LINE_VIEW_MAX_UNITS:
        raise ValueError(f"the line view draws up to {LINE_VIEW_MAX_UNITS} tokens or words; this text has {n:,}")
    if query is not None and not 0 <= query < n:
        raise ValueError(f"query {query} is outside the {n} {'tokens' if words is None else 'words'}")
    if top is None and n > LINE_VIEW_TOKENS:
        top = LINE_VIEW_TOP
    lines = []
    for head in heads:
        att.check_head(layer, head)
        w = att.head_weights(layer, head).astype(np.float64)  # (n_tokens, n_tokens)
        if words is not None:
            w = words.merge(w)
        if query is not None:
            w = np.where(np.arange(n)[:, None] == query, w, 0.0)
        if top is not None and top < n:
            cut = -np.sort(-w, axis=1)[:, top - 1:top]  # each row's top-th largest weight
            w = np.where(w >= cut, w, 0.0)
        i, j = np.nonzero(w >= LINE_VIEW_MIN)
        lines.append(np.stack([i, j, w[i, j]], axis=1))
    return LineView(labels=tuple(labels), heads=tuple(f"L{layer + 1} H{h + 1}" for h in heads), lines=tuple(lines),
                    query=query, top=top)


def query_row(att: ModelAttention, token: int, *, layer: int, head: int | None = None, words: WordGroups | None = None,
              sinks: np.ndarray | None = None) -> MatrixView:
    """Where one query looks in one layer (one head, or head None the mean over heads), re-read as the
    model pages' options say: `sinks` (n,) bool keys removed and each row renormalised; `words` the query
    is the whole word holding `token` (its pieces' rows averaged) and keys are words (summed).
    Shapes: -> matrix (1, m) or (1, W), rows sum to 1."""
    n = len(att.tokens)
    if not 0 <= token < n:
        raise ValueError(f"token {token} is outside the {n} tokens")
    word = None if words is None else words.word_of(token)
    pieces = [token] if word is None else list(words.pieces[word])
    rows = np.stack([attention_row(att, i, layer=layer, head=head) for i in pieces]).astype(np.float64)  # (p, n)
    if sinks is not None:
        rows = without_keys(rows, sinks)
    row = rows.mean(0)
    labels = att.tokens if words is None else words.words
    if words is not None:
        row = words.merge_columns(row[None])[0]
    who = f"head {head + 1}" if head is not None else "mean over heads"
    query = att.tokens[token] if word is None else words.words[word]
    title = f"Layer {layer + 1}, {who}: “{query}” as the query" + (", without sinks" if sinks is not None else "")
    return MatrixView(matrix=row[None], row_labels=(query,), col_labels=tuple(labels), mask=None, title=title,
                      value_name="weight", zmax=1.0)
