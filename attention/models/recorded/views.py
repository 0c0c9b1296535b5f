"""The views the model pages draw, and a notebook can: one layer as a matrix (`zoom`), where one query
looks in one layer (`query_row`) or in every head (`token_focus`), BertViz's lines (`line_view`), and ALTI's
contributions (`alti_view`).

Each view is re-read as the reader asks, by one value, `Reading(words, without_sinks, log)`: the row of
switches every model page shows. It travels one way, down: a page passes the switches, and the view
applies them itself (words from the tokenizer's word ids, attention.models.recorded.words; sinks by the one rule
of attention.models.forward.sinks), then says what it did in the MatrixView it returns (`reading`, and the
tokens removed as `sinks`), which figures and exports read.

Shapes: n query tokens, m key tokens (n = m for self-attention), W words, L layers, H heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attention.models.forward.device_arrays import DeviceArray
from attention.models.forward.model_attention import ModelAttention, shown_tokens
from attention.models.forward.recompute import block_max
from attention.models.recorded.aggregations import AGGREGATIONS, aggregate, attention_row, pooled
from attention.models.recorded.contributions import Alti, norm_row
from attention.models.recorded.words import WordGroups, word_groups
from attention.naming import head_name

MAX_SHOWN = 256  # larger matrices are shown as block maxima: at 512 tokens a cell would be ~2 px wide, too small
# to see or hover, and the 512 x 512 zoom alone made a 512-token sentence take 0.9-1.0 s to appear instead of ~0.7 s


@dataclass(frozen=True)
class Reading:
    """How to re-read attention: the model pages' switches, in one value."""

    words: bool = False  # words, not pieces: keys summed over a word's pieces, query rows averaged
    without_sinks: bool = False  # each head's sinks (attention.models.forward.sinks) removed, rows rescaled to sum to 1
    log: bool = False  # weights coloured by log10 (figures only: the numbers do not change)

    def groups(self, att: ModelAttention) -> WordGroups | None:
        """The words of att's text when reading words, else None (ValueError: its tokenizer cannot say)."""
        return word_groups(att) if self.words else None


AS_IS = Reading()


@dataclass(frozen=True)
class MatrixView:
    """A matrix ready to draw: its values, what its rows and columns are, and what it shows."""

    matrix: np.ndarray  # (rows, cols)
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    mask: np.ndarray | None  # (rows, cols) bool, True = may attend; None = all visible
    title: str
    value_name: str  # "weight", "norm" or (ALTI's contributions, each row summing to 1) "share"
    zmax: float | None  # top of the colour scale: 1 for weights, None (the largest value) for norms
    row_ids: tuple[int, ...] | None = None  # which token (or word) each row is, when some were hidden; None: 0..n-1
    block: int = 1  # tokens per cell side: > 1 when the matrix is shown as block maxima
    reading: Reading = AS_IS  # the reading applied (words and sinks only where the view could apply them)
    sinks: tuple[str, ...] = ()  # the tokens removed as sinks, in order
    window: int | None = None  # a local layer's sliding window in tokens, shown in token order (rows and
    # columns every token, or blocks of them): the figure draws its edge; None otherwise

    @property
    def log(self) -> bool:
        """Colour by log10: asked for, and the cells are weights."""
        return self.reading.log and self.value_name == "weight"

    @property
    def empty(self) -> bool:
        """Nothing to draw: every cell masked or 0 (a decoder's first token, read without its sink)."""
        shown = np.nan_to_num(np.asarray(self.matrix, dtype=np.float64))
        return not (shown if self.mask is None else np.where(self.mask, shown, 0.0)).any()


def without_keys(matrix: np.ndarray, gone: np.ndarray) -> np.ndarray:
    """Remove some keys (e.g. a head's sinks) from distributions: their weight set to 0, each row rescaled
    to sum to 1 (rows left with nothing stay 0). Shapes: matrix (..., m), gone (m,) or (..., m) bool."""
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


def pool_max(w: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """Max-pool the last two axes down to at most size x size, so thin lines (a diagonal) survive.

    Shapes: (..., n, m) -> ((..., ceil(n / b), ceil(m / b)), b) with b = ceil(max(n, m) / size).
    """
    n, m = w.shape[-2:]
    b = -(-max(n, m) // size)
    if b <= 1:
        return w, 1
    return pooled(w.reshape(-1, n, m), b).reshape(*w.shape[:-2], -(-n // b), -(-m // b)), b


def pool_mask(mask, size: int) -> np.ndarray:
    """Which cells of a mask pooled to at most size x size hold a visible pair (pool_max of a bool mask). A
    mask kept on a GPU (attention.models.forward.device_arrays) is pooled there: at 32,768 tokens it is 1 GB.
    Shapes: (n, m) bool -> (ceil(n / b), ceil(m / b)) bool."""
    if isinstance(mask, DeviceArray):
        n, m = mask.shape
        b = -(-max(n, m) // size)
        return block_max(mask.tensor.to(torch.uint8), b).cpu().numpy() > 0 if b > 1 else mask[:, :]
    return pool_max(np.asarray(mask, np.float32), size)[0] > 0


def block_labels(tokens, b: int) -> tuple[str, ...]:
    """Labels of blocks of b tokens: "40–47 bank…" (first position, last position, first token)."""
    if b == 1:
        return tuple(tokens)
    return tuple(f"{i}–{min(i + b, len(tokens)) - 1} {tokens[i]}…" for i in range(0, len(tokens), b))


def _named(att: ModelAttention, gone: np.ndarray | None) -> tuple[str, ...]:
    return () if gone is None else tuple(shown_tokens(att)[j] for j in np.nonzero(gone)[0])


def _labels(att: ModelAttention, side: str, stack: str = "self") -> tuple[str, ...]:
    """The labels of a stack's queries or keys (`side`): the input text's tokens as shown_tokens marks them
    (␣ for a leading space), an encoder-decoder's target tokens as they are."""
    tokens = att.query_tokens(stack) if side == "query" else att.key_tokens(stack)
    return shown_tokens(att) if tokens is att.tokens else tuple(tokens)


def zoom(att: ModelAttention, how: str, *, layer: int, head: int = 0, stack: str = "self",
         hide_special: bool = False, reading: Reading = AS_IS, max_shown: int = MAX_SHOWN) -> MatrixView:
    """One layer as one matrix (an aggregation, 0-based layer and head), re-read (self-attention only):

    - hide_special: drop [CLS]/[SEP]/BOS rows and columns;
    - reading.without_sinks: remove the sinks of the head (of any of the layer's heads, for a view over
      heads); they stay on screen as masked cells;
    - reading.words: merge pieces into words (columns summed, rows averaged).
    Distributions are renormalised to rows summing to 1 after hiding or removing. A matrix larger than
    max_shown per side comes back as block maxima, labelled by position ranges.
    """
    agg = AGGREGATIONS.get(how)
    att.check_head(layer, head, stack)
    rows, cols = _labels(att, "query", stack), _labels(att, "key", stack)
    mask = att.attention_stack(stack).mask_of(layer)
    kind = att.layer_kind(layer) if stack == "self" else ""
    one = agg is not None and agg.per_head
    title = f"Layer {layer + 1}" + (f" ({kind})" if kind else "") + ", " + (
        (f"head {head + 1}" + ("" if how == "head" else ", weighted norms")) if one else agg.label)
    grouping = reading.groups(att) if stack == "self" else None
    gone = None
    if stack == "self" and (hide_special or reading.without_sinks or grouping is not None):
        matrix = aggregate(att, how, layer=layer, head=head, stack=stack)
        n = len(rows)
        keep = ~att.special if hide_special and (~att.special).any() else np.ones(n, bool)
        if reading.without_sinks:
            gone = att.head_sinks(layer, head if one else None) & keep
            matrix = without_keys(matrix, gone) if agg.rows_sum_to_one else np.where(gone[None, :], 0.0, matrix)
            mask = (np.ones((n, n), bool) if mask is None else mask) & ~gone[None, :]
            title += ", without its sinks" if one else ", without the layer's sinks"
        matrix = drop_tokens(matrix, keep, renormalise=agg.rows_sum_to_one and hide_special)
        mask = None if mask is None else mask[np.ix_(keep, keep)]
        rows = cols = tuple(t for t, k in zip(rows, keep, strict=True) if k)
        row_ids = tuple(int(i) for i in np.nonzero(keep)[0])
        if grouping is not None:
            groups = grouping.restricted(keep)
            matrix, mask, rows = groups.merge(matrix), groups.merge_mask(mask), groups.words
            cols = rows
            row_ids = tuple(a for a, group in enumerate(grouping.pieces) if any(keep[i] for i in group))
            title += ", words"
        matrix, b = pool_max(matrix, max_shown)
    else:  # block maxima straight from the chunks: a 4,096-token head never sits in memory whole
        row_ids = None
        b = -(-max(len(rows), len(cols)) // max_shown)
        matrix = aggregate(att, how, layer=layer, head=head, stack=stack, block=b)
    if b > 1:
        mask = None if mask is None else pool_mask(mask, max_shown)
        title += f" (block maxima of {b}×{b})"
    return MatrixView(matrix=matrix, row_labels=block_labels(rows, b), col_labels=block_labels(cols, b), mask=mask,
                      title=title, value_name=agg.value_name, zmax=1.0 if agg.value_name == "weight" else None,
                      row_ids=row_ids if b == 1 else None, block=b,
                      reading=Reading(grouping is not None, gone is not None, reading.log), sinks=_named(att, gone),
                      window=att.window(layer) if stack == "self" and row_ids in (None, tuple(range(len(rows))))
                      and grouping is None else None)


def query_row(att: ModelAttention, token: int, *, layer: int, head: int | None = None,
              reading: Reading = AS_IS, measure: str = "weights") -> MatrixView:
    """Where one query looks in one layer: one head, or (head None) the mean over heads. Re-read: without
    the head's sinks (any head's, for the mean), each row renormalised; in words, the query is the whole
    word holding `token` (its pieces' rows averaged) and keys are words (summed).
    measure "norms": what each key hands over instead of its weight (contributions.norm_row, Kobayashi et al.
    2020): α ||v W_O|| for one head, ||Σ_h α v W_O|| for the layer (its heads together, not their mean); without
    sinks does not apply (a row of norms is not a distribution to renormalise), in words keys' norms are summed.
    Shapes: -> matrix (1, m) or (1, W); weights' rows sum to 1."""
    n = len(att.tokens)
    if not 0 <= token < n:
        raise ValueError(f"token {token} is outside the {n} tokens")
    norms = measure == "norms"
    if not norms and measure != "weights":
        raise ValueError(f"measure is 'weights' or 'norms', not {measure!r}")
    grouping = reading.groups(att)
    word = None if grouping is None else grouping.word_of(token)
    pieces = [token] if word is None else list(grouping.pieces[word])
    one = norm_row if norms else (lambda att, layer, i, head: attention_row(att, i, layer=layer, head=head))
    rows = np.stack([one(att, layer, i, head) for i in pieces]).astype(np.float64)  # (p, n)
    gone = att.head_sinks(layer, head) if reading.without_sinks and not norms else None
    if gone is not None:
        rows = without_keys(rows, gone)
    row = rows.mean(0)
    labels = shown_tokens(att) if grouping is None else grouping.words
    if grouping is not None:
        row = grouping.merge_columns(row[None])[0]
    who = f"head {head + 1}" if head is not None else ("heads together" if norms else "mean over heads")
    query = labels[token] if word is None else grouping.words[word]
    title = (f"Layer {layer + 1}, {who}: “{query}” as the query" + (", without sinks" if gone is not None else "")
             + (", weighted norms" if norms else ""))
    return MatrixView(matrix=row[None], row_labels=(query,), col_labels=tuple(labels), mask=None, title=title,
                      value_name="norm" if norms else "weight", zmax=None if norms else 1.0,
                      reading=Reading(grouping is not None, gone is not None, reading.log),
                      sinks=_named(att, gone))


def alti_view(found: Alti, att: ModelAttention, layer: int, *, rolled: bool = True) -> MatrixView:
    """ALTI's token-to-token contributions (attention.models.alti, Ferrando et al. 2022) as a matrix to draw: row i,
    how much each input token makes token i's output of `layer` (0-based), through the residual and the norm;
    `rolled`, composed from the embeddings up to that layer, else that layer's own. Shapes: -> (n, n), rows sum
    to 1."""
    att.check_head(layer, 0)
    matrix = (found.rolled if rolled else found.layers)[layer]
    labels = tuple(shown_tokens(att))
    what = (f"layers 1 to {layer + 1}" if layer else "layer 1") if rolled else f"layer {layer + 1} alone"
    return MatrixView(matrix=np.asarray(matrix, dtype=np.float32), row_labels=labels, col_labels=labels,
                      mask=None, title=f"ALTI, {what}: how much each token makes each token's output",
                      value_name="share", zmax=1.0)


def token_focus(att: ModelAttention, token: int, *, stack: str = "self", reading: Reading = AS_IS,
                max_shown: int = MAX_SHOWN) -> MatrixView:
    """Where one query token looks in every head: one row per (layer, head), "L1 H1" first. Re-read (self-
    attention): without sinks, each head's row loses that head's sinks and is rescaled; in words, `token`
    is a word: its pieces' rows averaged, keys merged into words.

    Recomputes one row per head. Shapes: -> matrix (L * H, m), keys pooled to max_shown blocks if longer.
    """
    s = att.attention_stack(stack)
    grouping = reading.groups(att) if stack == "self" else None
    queries = _labels(att, "query", stack) if grouping is None else grouping.words
    if not 0 <= token < len(queries):
        raise ValueError(f"token {token} is outside the {len(queries)} {'tokens' if grouping is None else 'words'}")
    gone = None
    if reading.without_sinks and stack == "self":  # (L * H, n): each head's own sinks
        gone = np.concatenate([att.layer_sinks(layer) for layer in range(s.n_layers)])
    pieces = [token] if grouping is None else grouping.pieces[token]
    rows = np.mean([_removed(s.query_rows(i).reshape(s.n_layers * s.n_heads, -1), gone) for i in pieces], axis=0)
    if grouping is not None:
        rows = grouping.merge_columns(rows).astype(np.float32)
    b = -(-rows.shape[-1] // max_shown)
    if b > 1:  # block maxima along the keys only
        rows = torch.nn.functional.max_pool1d(torch.from_numpy(rows)[:, None], b, b, ceil_mode=True)[:, 0].numpy()
    labels = tuple(head_name(layer, head, spaced=True) for layer in range(s.n_layers) for head in range(s.n_heads))
    keys = _labels(att, "key", stack) if grouping is None else grouping.words
    mask = None
    if b == 1 and (any(m is not None for m in s.masks) or (gone is not None and grouping is None)):
        mask = np.ones(rows.shape, bool)  # (L * H, keys): each row what its layer lets the query see
        for layer in range(s.n_layers):
            visible = s.mask_of(layer) if grouping is None else grouping.merge_mask(s.mask_of(layer))
            if visible is not None:
                mask[layer * s.n_heads:(layer + 1) * s.n_heads] = visible[token]
        if gone is not None and grouping is None:
            mask &= ~gone
    title = f"“{queries[token]}” as the query" + (", each head without its sinks" if gone is not None else "")
    return MatrixView(matrix=rows, row_labels=labels, col_labels=block_labels(keys, b), mask=mask, title=title,
                      value_name="weight", zmax=1.0,
                      reading=Reading(grouping is not None, gone is not None, reading.log))


def _removed(rows: np.ndarray, gone: np.ndarray | None) -> np.ndarray:
    return rows if gone is None else without_keys(rows, gone).astype(rows.dtype)


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
    reading: Reading = AS_IS  # the reading applied


def line_view(att: ModelAttention, layer: int, heads, *, query: int | None = None, reading: Reading = AS_IS,
              top: int | None = None) -> LineView:
    """The lines of some heads of one layer (self-attention). Texts longer than LINE_VIEW_TOKENS keep
    each query's LINE_VIEW_TOP strongest keys unless `top` says otherwise; `query` keeps one query's lines;
    the reading removes each head's sinks and merges pieces into words, in that order."""
    heads = [int(h) for h in heads]
    grouping = reading.groups(att)
    labels = shown_tokens(att) if grouping is None else grouping.words
    n = len(labels)
    if n > LINE_VIEW_MAX_UNITS:
        raise ValueError(f"the line view draws up to {LINE_VIEW_MAX_UNITS} tokens or words; this text has {n:,}")
    if query is not None and not 0 <= query < n:
        raise ValueError(f"query {query} is outside the {n} {'tokens' if grouping is None else 'words'}")
    if top is None and n > LINE_VIEW_TOKENS:
        top = LINE_VIEW_TOP
    lines = []
    for head in heads:
        att.check_head(layer, head)
        w = att.head_weights(layer, head).astype(np.float64)  # (n_tokens, n_tokens)
        if reading.without_sinks:
            w = without_keys(w, att.head_sinks(layer, head))
        if grouping is not None:
            w = grouping.merge(w)
        if query is not None:
            w = np.where(np.arange(n)[:, None] == query, w, 0.0)
        if top is not None and top < n:
            cut = -np.sort(-w, axis=1)[:, top - 1:top]  # each row's top-th largest weight
            w = np.where(w >= cut, w, 0.0)
        i, j = np.nonzero(w >= LINE_VIEW_MIN)
        lines.append(np.stack([i, j, w[i, j]], axis=1))
    return LineView(labels=tuple(labels), heads=tuple(head_name(layer, h, spaced=True) for h in heads),
                    lines=tuple(lines),
                    query=query, top=top, reading=Reading(grouping is not None, reading.without_sinks, reading.log))
