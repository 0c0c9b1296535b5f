"""Every per-head number of a model on one text, from one pass over all heads: the all-heads grid, the
Head atlas statistics and types, attention by distance, and where attention piles up (sinks, by the rule
of attention.models.forward.sinks).

This module is the record, HeadSurvey, and what it reads off its sums. The pass that makes it
(attention.models.forward.survey_pass) takes each layer's weights a chunk of query rows at a time, so memory
stays bounded at thousands of tokens, and accumulates everything the all-heads views need; after it, each
such view is a lookup. It runs inside the model's forward pass: attend() runs the model with SurveyKernel
(attention.models.forward.kernel), our attention kernel, which makes each layer's output from the same
weights it sums (the scores are computed once, not once by the fused kernel and again for the survey).
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

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from attention.models.forward.sinks import sink_rule

TYPE_THRESHOLD = 0.5
BROAD_FRACTION = 0.9

METRICS = {  # HeadSurvey field -> (label, what it measures): the Head atlas's statistics
    "entropy": ("entropy (nats)", "Mean entropy of the head's attention rows: low = focused, high = broad."),
    "special_mass": ("on special tokens", "Share of attention on [CLS]/[SEP]/BOS (or the first token if none)."),
    "previous": ("on previous token", "Share on token i − 1."),
    "same": ("on itself", "Share on token i."),
    "next": ("on next token", "Share on token i + 1."),
    "punctuation": ("on punctuation", "Share on punctuation tokens."),
    "sink_mass": ("sink mass", "Share on this head's sinks (attention.models.forward.sinks): the first token, special "
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
    majority_share: np.ndarray  # (L, H, n) share of query rows in which key j holds over half the weight
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
        """(L, H) mass at query - key = offset; zeros where the text is too short to have that offset (a
        one-token text has no previous token: issue 42's IndexError on the Head atlas)."""
        at = offset + self.n_tokens - 1
        if not 0 <= at < self.offset_mass.shape[-1]:
            return np.zeros(self.offset_mass.shape[:-1], self.offset_mass.dtype)
        return self.offset_mass[..., at]

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
        """(L, H, n) bool, each head's sink tokens by attention.models.forward.sinks's rule."""
        return sink_rule(self.sink_candidates, self.majority_share)

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
