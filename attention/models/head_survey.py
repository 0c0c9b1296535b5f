"""Every per-head number of a model on one text, from one pass over all heads: the all-heads grid, the
Head atlas statistics and types, attention by distance, and where attention piles up (sinks, by the rule
of attention.models.sinks).

The pass takes each layer's weights a chunk of query rows at a time, so memory stays bounded at
thousands of tokens, and accumulates everything the all-heads views need; after it, each such view is a
lookup. It runs inside the model's forward pass: attend() runs the model with SurveyKernel, our attention
kernel, which makes each layer's output from the same weights it sums (the scores are computed once, not
once by the fused kernel and again for the survey). A result made otherwise (the model's own weights, a
saved file) is surveyed by a pass of its own that recomputes the weights (attention.models.recompute).
Offsets are query position minus key position: +1 is the previous token, 0 the token itself, -1 the
next one.

Attention by distance is summed exactly per offset in the pass; the profile shows it in offset ranges
that widen with distance (0, 1, 2, 3, 4-5, 6-8, 9-12...), so a long input reads as a curve rather than
8,000 noisy points.

Head types follow Clark et al. 2019, "What does BERT look at?": a head is of a type when over half its
attention (averaged over tokens) goes there (previous/next token, [SEP]/[CLS]). "Broad" heads spread
attention widely; we call a head broad when its mean entropy exceeds 90 % of the uniform entropy of the
same rows (our threshold, stated in the atlas).

Shapes: L layers, H heads, n tokens, c tile size, B offset ranges.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np
import torch

from attention.models.model_attention import ModelAttention
from attention.models.recompute import block_max, chunk_rows, compute_device, layer_scores, row_chunks, work_threads
from attention.models.sinks import remember_majority_share, sink_candidates, sink_rule
from attention.models.tokens import is_punctuation

GRID_CELLS = 120_000  # values in the all-heads grid: bounds its payload (~0.5 MB) whatever the length
SURVEY_CHUNK_FLOATS = 2_000_000  # scores per chunk (8 MB, 54 rows of 9 heads at 4,096 tokens). Chunks need
# not be whole rows of tiles (at 4,096 tokens those are 205 rows: 30 MB). Measured at 4,096 tokens on 2 threads,
# one layer's scores took 181 ms in 1 M-float chunks (the matmuls too thin), 108 ms in 2 M and 127 ms in 4 M.
TYPE_THRESHOLD = 0.5
BROAD_FRACTION = 0.9

METRICS = {  # HeadSurvey field -> (label, what it measures): the Head atlas's statistics
    "entropy": ("entropy (nats)", "Mean entropy of the head's attention rows: low = focused, high = broad."),
    "special_mass": ("on special tokens", "Share of attention on [CLS]/[SEP]/BOS (or the first token if none)."),
    "previous": ("on previous token", "Share on token i − 1."),
    "same": ("on itself", "Share on token i."),
    "next": ("on next token", "Share on token i + 1."),
    "punctuation": ("on punctuation", "Share on punctuation tokens."),
    "sink_mass": ("sink mass", "Share on this head's sinks (attention.models.sinks): the first token, special "
                  "tokens, and any token that holds over half the weight of over half the rows."),
    "mean_distance": ("mean distance (tokens)", "Mean |query − key| position, weighted by attention: small = "
                      "local head, large = long-range head."),
}


def distance_buckets(n: int) -> np.ndarray:
    """Offset ranges [lo, hi) (query - key) for attention by distance: single offsets near 0, then ranges
    that grow by half each time, on both sides. Shapes: -> (B, 2) ints, most negative first."""
    edges = [0, 1, 2, 3, 4]
    while edges[-1] < n:
        edges.append(edges[-1] + max(1, edges[-1] // 2))
    ahead = [(1 - hi, 1 - lo) for lo, hi in zip(edges[1:-1], edges[2:], strict=True)][::-1]  # key after query
    back = list(zip(edges[:-1], edges[1:], strict=True))  # key at or before the query
    return np.array(ahead + back)


@dataclass(frozen=True)
class DistanceProfile:
    """Mean attention weight by distance, per head. Shapes: ranges (B, 2), mean_weight (L, H, B)."""

    ranges: np.ndarray  # offset ranges [lo, hi) of query - key, most negative first
    mean_weight: np.ndarray  # mean weight of one visible (query, key) pair in each range

    def of(self, layer: int, head: int | None = None) -> np.ndarray:
        """(B,) one head's profile, or (head None) the mean of the layer's heads."""
        return self.mean_weight[layer].mean(0) if head is None else self.mean_weight[layer, head]

    @property
    def labels(self) -> tuple[str, ...]:
        """Where each range starts, for an axis: "0", "1", "4" for keys before the query, "−1", "−5" after it."""
        return tuple(f"{int(lo if lo >= 0 else hi - 1)}".replace("-", "−") for lo, hi in self.ranges)

    @property
    def spans(self) -> tuple[str, ...]:
        """The offsets each range holds, for hover: "1", "4–5", "−5…−4"."""
        def span(lo: int, hi: int) -> str:
            last = hi - 1
            if lo == last:
                return f"{lo}".replace("-", "−")
            return f"{lo}–{last}" if lo >= 0 else f"{lo}…{last}".replace("-", "−")
        return tuple(span(int(lo), int(hi)) for lo, hi in self.ranges)


@dataclass(frozen=True)
class HeadSurvey:
    """Per-head summaries of the self-attention. Every (L, H) array is averaged over query rows."""

    tiles: np.ndarray  # (L, H, c, c) block maxima of each head's weights: the all-heads grid
    block: int  # tokens per tile cell side
    entropy: np.ndarray  # (L, H) mean row entropy, nats
    uniform_entropy: np.ndarray  # (L,) mean over rows of log(number of visible keys): a layer with a sliding
    # window sees fewer keys than a full one
    column_mass: np.ndarray  # (L, H, n) mean over query rows of the weight on key j
    column_majority: np.ndarray  # (L, H, n) share of query rows in which key j holds over half the weight
    offset_mass: np.ndarray  # (L, H, n + m - 1) summed weight at each offset query - key, from -(m - 1) up
    offset_pairs: np.ndarray  # (L, n + m - 1) visible (query, key) pairs at each offset, per layer (its mask)
    special_mass: np.ndarray  # (L, H) share of attention on special tokens ([CLS], [SEP], BOS), or on token 0
    punctuation: np.ndarray  # (L, H) share on punctuation tokens
    sink_candidates: np.ndarray  # (n,) bool: the first token and special tokens, sinks of every head

    @property
    def n_tokens(self) -> int:
        return self.column_mass.shape[-1]

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays it holds (kept with the result: AttentionStack.nbytes counts them)."""
        return sum(getattr(self, f.name).nbytes for f in fields(self) if isinstance(getattr(self, f.name), np.ndarray))

    @property
    def offsets(self) -> np.ndarray:
        """(n + m - 1,) the offsets query - key that offset_mass is indexed by, most negative first."""
        return np.arange(-(self.n_tokens - 1), self.offset_mass.shape[-1] - self.n_tokens + 1)

    def _offset(self, offset: int) -> np.ndarray:
        return self.offset_mass[..., offset + self.n_tokens - 1]

    @cached_property
    def previous(self) -> np.ndarray:
        """(L, H) share on token i - 1, over the rows that have one."""
        return self._offset(1) / max(self.n_tokens - 1, 1)

    @cached_property
    def same(self) -> np.ndarray:
        """(L, H) share on token i itself."""
        return self._offset(0) / self.n_tokens

    @cached_property
    def next(self) -> np.ndarray:
        """(L, H) share on token i + 1, over the rows that have one."""
        return self._offset(-1) / max(self.n_tokens - 1, 1)

    @cached_property
    def mean_distance(self) -> np.ndarray:
        """(L, H) mean |query - key| in tokens, weighted by attention: local heads low, long-range high."""
        return (self.offset_mass * np.abs(self.offsets)).sum(-1) / self.n_tokens

    @cached_property
    def sinks(self) -> np.ndarray:
        """(L, H, n) bool, each head's sink tokens by attention.models.sinks's rule."""
        return sink_rule(self.sink_candidates, self.column_majority)

    @cached_property
    def sink_mass(self) -> np.ndarray:
        """(L, H) share of the head's attention (mean over rows) on its sinks."""
        return (self.column_mass * self.sinks).sum(-1)

    def distance_profile(self) -> DistanceProfile:
        """Attention by distance, in the offset ranges of distance_buckets: the mean weight of one visible
        (query, key) pair in each range. Ranges no pair falls in (keys after the query, for a causal
        model) are left out; a range that one layer cannot see (beyond its sliding window) is NaN there."""
        index = self.offsets
        ranges = np.clip(distance_buckets(self.n_tokens), index[0], index[-1] + 1)  # no offset beyond the text
        inside = [(index >= lo) & (index < hi) for lo, hi in ranges]
        pairs = np.stack([self.offset_pairs[:, at].sum(-1) for at in inside], -1)  # (L, B)
        mass = np.stack([self.offset_mass[..., at].sum(-1) for at in inside], -1)  # (L, H, B)
        keep = (pairs > 0).any(0)
        seen = pairs[:, None, keep]
        mean = np.divide(mass[..., keep], seen, out=np.full(mass[..., keep].shape, np.nan), where=seen > 0)
        return DistanceProfile(ranges=ranges[keep], mean_weight=mean)

    @cached_property
    def head_types(self) -> np.ndarray:
        """(L, H) str: "previous-token", "next-token", "sink", "self", "broad" or ""."""
        types = np.full(self.entropy.shape, "", dtype=object)
        types[self.entropy > BROAD_FRACTION * self.uniform_entropy[:, None]] = "broad"
        for name, share in (("self", self.same), ("next-token", self.next), ("previous-token", self.previous),
                            ("sink", self.special_mass)):
            types[share > TYPE_THRESHOLD] = name
        return types.astype(str)

    def upper_bound(self, metric: str) -> float | None:
        """The largest value `metric` can take: uniform entropy, n - 1 tokens, or 1 for a share."""
        if metric == "entropy":
            return max(float(self.uniform_entropy.max()), 1e-9)
        return float(self.n_tokens - 1) if metric == "mean_distance" else 1.0


def tile_size(n: int, n_heads_total: int, max_cells: int = GRID_CELLS) -> int:
    """Cells per side of one head's tile, so that the whole grid holds at most max_cells values."""
    return int(max(1, min(32, n, max(4, math.sqrt(max_cells / n_heads_total) - 1))))


def survey(att: ModelAttention, *, progress: Callable[[float, str], None] | None = None) -> HeadSurvey:
    """Every head's summaries of the self-attention. Made during the forward pass when the model ran our
    SurveyKernel (attend() keeps them with the result), else by one pass over every head now, layer by
    layer, a chunk of query rows at a time; kept with the result either way (`AttentionStack.derived`)."""
    s = att.self_attn
    if "survey" not in s.derived:
        L, H, n, m = s.n_layers, s.n_heads, s.n_queries, s.n_keys
        totals = _Totals(L, H, n, m)
        with work_threads(n):
            for layer in range(L):
                for rows in row_chunks(n, totals.rows_per_chunk):
                    keys = s.keys_seen(rows)  # a causal chunk never sees later keys: their weights are 0
                    totals.add(layer, rows, s.layer_scores(layer, rows=rows, keys=keys, out=totals.scores), s.causal)
                if progress:
                    progress((layer + 1) / L, f"Surveying every head: layer {layer + 1} of {L}")
        s.derived["survey"] = _finish(att, totals)
    return s.derived["survey"]


class SurveyKernel:
    """The attention kernel attend() runs the model with (an attention.models.capture.OwnKernel): for each
    layer, a chunk of query rows at a time, the weights softmax(masked scaled q k^T) as the model's eager
    kernel makes them, the layer's output (weights @ v) from them, and the survey's sums from the same
    weights. The scores are computed once, where the fused kernel would compute and drop them, so the grid
    costs no second pass.

    Calls it cannot follow (more calls than layers, a query length that changes) are left to the fused
    kernel, and `survey` then answers None (the survey makes its own pass when asked).
    Shapes: a call's q (H, n, d), k and v (H_kv, m, d) -> output (n, H, d).
    """

    def __init__(self, n_layers: int):
        self.n_layers = n_layers
        self.layers_done = 0
        self.followed = True
        self._totals: _Totals | None = None
        self._later_keys: dict[int, bool] = {}  # id(mask) -> whether some query sees a later key

    def __call__(self, call) -> torch.Tensor | None:
        H, n, d = call.q.shape
        n_kv, m, _ = call.k.shape
        if self._totals is None:
            self._totals = _Totals(self.n_layers, H, n, m)
        t = self._totals
        if self.layers_done >= self.n_layers or t.entropy.shape[1] != H or t.column_mass.shape[2] != m \
                or t.n != n or call.v.shape[-1] != d:
            self.followed = False
            return None
        mask = call.mask
        if id(mask) not in self._later_keys:
            no_later = call.causal or (mask is not None and n == m and not np.triu(mask, 1).any())
            self._later_keys[id(mask)] = not no_later
        causal = not self._later_keys[id(mask)]
        device = compute_device()
        v = torch.from_numpy(call.v).to(device)
        out = torch.empty(n, H, d, device=device)
        for rows in row_chunks(n, t.rows_per_chunk):
            keys = rows.stop if causal else m
            scores = layer_scores(call.q, call.k, scale=call.scale, mask=mask, causal=call.causal, rows=rows,
                                  keys=keys, softcap=call.softcap, out=t.scores)
            w = t.add(self.layers_done, rows, scores, causal)  # (H, r, keys), grouped by the KV head they read
            r = rows.stop - rows.start
            grouped = torch.matmul(w.view(n_kv, H // n_kv * r, keys), v[:, :keys])  # (H_kv, group * r, d)
            out[rows] = grouped.view(H, r, d).transpose(0, 1)
        self.layers_done += 1
        return out

    def survey(self, att: ModelAttention) -> HeadSurvey | None:
        """The survey of `att`, the result of the forward pass this kernel ran in; None unless the kernel
        made every self-attention layer of it."""
        s = att.self_attn
        t = self._totals
        if (not self.followed or t is None or self.layers_done != s.n_layers or not s.captured
                or t.n != s.n_queries or t.column_mass.shape[1:] != (s.n_heads, s.n_keys)):
            return None
        return _finish(att, t)


def _finish(att: ModelAttention, totals: _Totals) -> HeadSurvey:
    """The HeadSurvey from the pass's sums, with what the tokens add: special tokens, punctuation, sinks."""
    s = att.self_attn
    L, n = s.n_layers, s.n_queries
    by_mask = {}  # id of each distinct mask -> (visible pairs per offset, uniform entropy): layers share masks
    for layer in range(L):
        mask = s.mask_of(layer)
        if id(mask) not in by_mask:
            by_mask[id(mask)] = _visible_pairs(s, mask, totals.rows_per_chunk)
    special = att.special.copy()
    if not special.any():  # decoders without BOS: the first token plays the special token's role
        special[0] = True
    punct = np.array([is_punctuation(t) and not sp for t, sp in zip(att.tokens, att.special, strict=True)])
    column_mass, column_majority = totals.column_mass / n, totals.column_majority / n
    for layer in range(L):  # the sink rule's counts, made in this pass: no view counts them again
        remember_majority_share(s, layer, column_majority[layer])
    per_layer = [by_mask[id(s.mask_of(layer))] for layer in range(L)]
    return HeadSurvey(
        tiles=totals.tiles, block=totals.block, entropy=totals.entropy / n,
        uniform_entropy=np.array([uniform for _, uniform in per_layer]),
        column_mass=column_mass, column_majority=column_majority, offset_mass=totals.offset_mass,
        offset_pairs=np.stack([pairs for pairs, _ in per_layer]), special_mass=column_mass[..., special].sum(-1),
        punctuation=column_mass[..., punct].sum(-1), sink_candidates=sink_candidates(att.special),
    )


class _Totals:
    """The sums the pass adds up, chunk by chunk (see HeadSurvey for what each becomes), and the three
    buffers every chunk is computed in: allocated once per survey, not once per chunk (a fresh 16 MB
    tensor per chunk is a fresh mmap, and its page faults doubled the survey's time in the server)."""

    def __init__(self, L: int, H: int, n: int, m: int):
        self.n, self.m = n, m
        self.block = -(-max(n, m) // tile_size(n, L * H))
        self.rows_per_chunk = chunk_rows(H, m, SURVEY_CHUNK_FLOATS)
        self.tiles = np.zeros((L, H, -(-n // self.block), -(-m // self.block)), np.float32)
        self.entropy = np.zeros((L, H))
        self.column_mass, self.column_majority = np.zeros((L, H, m)), np.zeros((L, H, m))
        self.offset_mass = np.zeros((L, H, n + m - 1))
        r = min(self.rows_per_chunk, n)
        device = compute_device()
        self.scores = torch.empty(H * r * m, device=device)
        self.weights = torch.empty(H * r * m, device=device)
        self.skew = torch.empty(H * r * (m + r + 1), device=device)

    def add(self, layer: int, rows: slice, scores: torch.Tensor, causal: bool) -> torch.Tensor:
        """One chunk of query rows of one layer, from its masked scores (H, r, keys) (`causal`: no row sees a
        key after the chunk's last row, and the scores stop there). Returns the weights, (H, r, keys) in
        this object's buffer: valid until the next chunk."""
        h, r, keys = scores.shape
        w = self.weights[:h * r * keys].view(h, r, keys)
        torch._softmax(scores, -1, False, out=w)  # torch.softmax, as the eager kernel runs it, into our buffer
        row_max = scores.amax(-1)  # (H, r)
        top = w.amax(-1)  # (H, r) the top key's weight: exp(0) / Z = 1 / Z
        # Entropy without a log over every weight: H = log Z + max - sum_j w_j s_j (the scores are not needed
        # after this, so the product is taken in their buffer; a masked score times its weight 0 is 0).
        entropy = row_max - torch.log(top) - scores.mul_(w).sum(-1)
        self.entropy[layer] += entropy.sum(-1).cpu().numpy()
        self.column_majority[layer, :, :keys] += _majority_counts(w, top).cpu().numpy()
        _pool_into(self.tiles[layer], w, rows.start, self.block)
        self.column_mass[layer, :, :keys] += w.sum(1).cpu().numpy()
        lowest, sums = _diagonal_sums(w, rows.start, causal, self.skew)
        at = lowest + self.m - 1
        self.offset_mass[layer, :, at:at + sums.shape[1]] += sums.cpu().numpy()
        return w


def _pool_into(tiles: np.ndarray, w: torch.Tensor, first_row: int, block: int) -> None:
    """Raise the tiles (block maxima of one layer's weights) to the maxima of one chunk of its rows, which
    need not start or end at a tile's edge: over the keys first, then over the chunk's rows tile by tile.
    Shapes: tiles (H, ceil(n / b), ceil(m / b)), w (H, r, keys) for rows first_row...first_row + r - 1."""
    by_keys = block_max(w, block, rows=False)  # (H, r, ceil(keys / b))
    r, width = by_keys.shape[1], by_keys.shape[2]
    start = 0
    while start < r:
        tile = (first_row + start) // block
        stop = min(r, (tile + 1) * block - first_row)
        part = by_keys[:, start:stop].amax(1).cpu().numpy()  # (H, ceil(keys / b))
        np.maximum(tiles[:, tile, :width], part, out=tiles[:, tile, :width])
        start = stop


def _majority_counts(w: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """In how many rows each key holds over half the weight (at most one key per row can).

    Most such rows put it on the first token (a sink): those are counted from one column; the key of any
    other row is found by argmax over that row alone (an argmax over every row costs more than the softmax).
    Shapes: w (H, r, keys), top (H, r) each row's largest weight -> (H, keys) float32.
    """
    h, _, keys = w.shape
    counts = torch.zeros(h, keys, device=w.device)
    on_first = w[..., 0] > 0.5
    counts[:, 0] = on_first.sum(-1)
    heads, rows = ((top > 0.5) & ~on_first).nonzero(as_tuple=True)
    if len(heads):
        counts.index_put_((heads, w[heads, rows].argmax(-1)), torch.ones(len(heads), device=w.device), accumulate=True)
    return counts


def _visible_pairs(s, mask: np.ndarray | None, rows_per_chunk: int) -> tuple[np.ndarray, float]:
    """For one mask: the visible (query, key) pairs at each offset, (n + m - 1,) from the most negative up,
    and the mean over rows of log(visible keys), the entropy of uniform attention."""
    n, m = s.n_queries, s.n_keys
    visible = np.ones((n, m), bool) if mask is None else mask
    out = np.zeros(n + m - 1)
    for rows in row_chunks(n, rows_per_chunk):
        chunk = torch.from_numpy(np.ascontiguousarray(visible[rows, :s.keys_seen(rows)], np.float32))
        lowest, pairs = _diagonal_sums(chunk[None], rows.start, s.causal)
        at = lowest + m - 1
        out[at:at + pairs.shape[1]] += pairs[0].numpy()
    return out, float(np.mean(np.log(np.maximum(visible.sum(-1), 1))))


def _diagonal_sums(w: torch.Tensor, first_row: int, causal: bool,
                   buffer: torch.Tensor | None = None) -> tuple[int, torch.Tensor]:
    """Sums of a chunk of rows along its diagonals (constant offset query - key), without a loop.

    For rows i = first_row + r and keys j < K: lay each row out after R zeros, in rows one longer than
    that (R + K + 1), so that reading them R + K + 1 apart moves row r right by r places and column c
    holds offset first_row + R - c in every row; summing the columns gives the diagonal sums. A causal
    chunk has no key after its rows: columns 1..K suffice (offsets >= 0). `buffer` (at least
    H * R * (K + R + 1) floats) is reused between calls. A causal chunk whose keys stop at its last row
    needs no copy at all (_causal_diagonal_sums).
    Shapes: w (H, R, K) -> (the smallest offset, (H, count) sums from the smallest offset up).
    """
    h, r, k = w.shape
    if causal and k == first_row + r and r > 1 and w.is_contiguous():
        return 0, _causal_diagonal_sums(w, first_row)
    size = h * r * (k + r + 1)
    flat = torch.empty(size) if buffer is None else buffer[:size]
    rows = flat.view(h, r * (k + r + 1))[:, :r * (k + r)].view(h, r, k + r)  # row i: R zeros, then w[i]
    rows[..., :r] = 0
    rows[..., r:] = w
    flat.view(h, r * (k + r + 1))[:, r * (k + r):] = 0  # R more zeros after the last row
    if causal:  # offsets first_row + R - 1 down to first_row + R - K, all >= 0
        skewed = flat.as_strided((h, r, k + 1), (r * (k + r + 1), k + r + 1, 1))
        return first_row + r - k, skewed.sum(1)[:, 1:].flip(-1)
    skewed = flat.view(h, r, k + r + 1)
    return first_row - (k - 1), skewed.sum(1)[:, 1:k + r].flip(-1)


def _causal_diagonal_sums(w: torch.Tensor, first_row: int) -> torch.Tensor:
    """_diagonal_sums of a causal chunk whose keys stop at its last row (K = first_row + R), read in place.

    Row t's key j sits at t * K + j of each head's block: stepping K + 1 along it keeps j - t, so a view
    with strides (K + 1, 1) over rows t >= 1 and u = j - t from -(R - 1) to first_row holds, in column u,
    offset first_row - u in every row. Where j would be negative the view reads the end of row t - 1,
    keys after that row's own position: weights 0 in a causal chunk. Row 0 (offsets 0..first_row) is
    added on its own. Shapes: w (H, R, K) contiguous, zero after each row's position -> (H, K) sums for
    offsets 0..K - 1.
    """
    h, r, k = w.shape
    span = k  # u from -(R - 1) up to first_row: K values
    rest = w.as_strided((h, r - 1, span), (r * k, k + 1, 1), w.storage_offset() + k + 1 - (r - 1)).sum(1)
    rest[:, r - 1:] += w[:, 0, :first_row + 1]  # row 0: u = j from 0 to first_row
    return rest.flip(-1)  # column u holds offset first_row - u: from offset 0 up

