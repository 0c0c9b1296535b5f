"""Every per-head number of a model on one text, from one pass over all heads: the all-heads grid, the
Head atlas statistics and types, attention by distance, and where attention piles up (sinks, by the rule
of attention.models.sinks).

The pass recomputes each layer's weights a chunk of query rows at a time (attention.models.recompute),
so memory stays bounded at thousands of tokens, and accumulates everything the all-heads views need;
after it, each such view is a lookup. Offsets are query position minus key position: +1 is the
previous token, 0 the token itself, -1 the next one.

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
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from attention.models.model_attention import ModelAttention
from attention.models.recompute import block_max, chunk_rows, row_chunks, work_threads
from attention.models.sinks import remember_majority_share, sink_candidates, sink_rule
from attention.models.tokens import is_punctuation

GRID_CELLS = 120_000  # values in the all-heads grid: bounds its payload (~0.5 MB) whatever the length
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
    """One pass over every head of the self-attention, layer by layer, a chunk of query rows at a time."""
    s = att.self_attn
    L, H, n, m = s.n_layers, s.n_heads, s.n_queries, s.n_keys
    block = -(-max(n, m) // tile_size(n, L * H))
    rows_per_chunk = chunk_rows(H, m, multiple=block)
    totals = _Totals(L, H, n, m, block, rows_per_chunk)
    by_mask = {}  # id of each distinct mask -> (visible pairs per offset, uniform entropy): layers share masks
    with work_threads(n):
        for layer in range(L):
            for rows in row_chunks(n, rows_per_chunk):
                totals.add(s, layer, rows)
            mask = s.mask_of(layer)
            if id(mask) not in by_mask:
                by_mask[id(mask)] = _visible_pairs(s, mask, rows_per_chunk)
            if progress:
                progress((layer + 1) / L, f"Surveying every head: layer {layer + 1} of {L}")
    special = att.special.copy()
    if not special.any():  # decoders without BOS: the first token plays the special token's role
        special[0] = True
    punct = np.array([is_punctuation(t) and not sp for t, sp in zip(att.tokens, att.special, strict=True)])
    column_mass, column_majority = totals.column_mass / n, totals.column_majority / n
    for layer in range(L):  # the sink rule's counts, made in this pass: no view counts them again
        remember_majority_share(s, layer, column_majority[layer])
    per_layer = [by_mask[id(s.mask_of(layer))] for layer in range(L)]
    return HeadSurvey(
        tiles=totals.tiles, block=block, entropy=totals.entropy / n,
        uniform_entropy=np.array([uniform for _, uniform in per_layer]),
        column_mass=column_mass, column_majority=column_majority, offset_mass=totals.offset_mass,
        offset_pairs=np.stack([pairs for pairs, _ in per_layer]), special_mass=column_mass[..., special].sum(-1),
        punctuation=column_mass[..., punct].sum(-1), sink_candidates=sink_candidates(att.special),
    )


class _Totals:
    """The sums the pass adds up, chunk by chunk (see HeadSurvey for what each becomes), and the three
    buffers every chunk is computed in: allocated once per survey, not once per chunk (a fresh 16 MB
    tensor per chunk is a fresh mmap, and its page faults doubled the survey's time in the server)."""

    def __init__(self, L: int, H: int, n: int, m: int, block: int, rows_per_chunk: int):
        self.m, self.block = m, block
        self.tiles = np.zeros((L, H, -(-n // block), -(-m // block)), np.float32)
        self.entropy = np.zeros((L, H))
        self.column_mass, self.column_majority = np.zeros((L, H, m)), np.zeros((L, H, m))
        self.offset_mass = np.zeros((L, H, n + m - 1))
        r = min(rows_per_chunk, n)
        self.scores = torch.empty(H * r * m)
        self.weights = torch.empty(H * r * m)
        self.skew = torch.empty(H * r * (m + r + 1))

    def add(self, s, layer: int, rows: slice) -> None:
        """One chunk of query rows of one layer."""
        keys = s.keys_seen(rows)  # a causal chunk never sees later keys: their weights are 0
        scores = s.layer_scores(layer, rows=rows, keys=keys, out=self.scores)  # (H, r, keys)
        h, r, _ = scores.shape
        row_max, top_key = scores.max(dim=-1)  # (H, r): the top key's weight is exp(0) / Z = 1 / Z
        w = torch.sub(scores, row_max[..., None], out=self.weights[:h * r * keys].view(h, r, keys)).exp_()
        z = w.sum(-1)  # (H, r)
        w.div_(z[..., None])  # softmax, in place
        # Entropy without a log over every weight: H = log Z + max - sum_j w_j s_j.
        entropy = row_max + torch.log(z) - torch.einsum("hrk,hrk->hr", w, scores)
        self.entropy[layer] += entropy.sum(-1).cpu().numpy()
        first = rows.start // self.block
        pooled = block_max(w, self.block)
        self.tiles[layer, :, first:first + pooled.shape[1], :pooled.shape[2]] = pooled.cpu().numpy()
        self.column_mass[layer, :, :keys] += w.sum(1).cpu().numpy()
        majority = torch.zeros(h, keys).scatter_add_(1, top_key, (z < 2).float())  # 1 / Z > 0.5: over half
        self.column_majority[layer, :, :keys] += majority.cpu().numpy()
        lowest, sums = _diagonal_sums(w, rows.start, s.causal, self.skew)
        at = lowest + self.m - 1
        self.offset_mass[layer, :, at:at + sums.shape[1]] += sums.cpu().numpy()


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
    H * R * (K + R + 1) floats) is reused between calls.
    Shapes: w (H, R, K) -> (the smallest offset, (H, count) sums from the smallest offset up).
    """
    h, r, k = w.shape
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
