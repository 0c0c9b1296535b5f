"""What each head does on one text, in numbers (the Head atlas): entropy, where the attention goes, a type.

Clark et al. 2019, "What does BERT look at?": a head is of a type when over half its attention goes
there on average (Section 3: previous/next token, [SEP]/[CLS]). "Broad" heads spread attention widely;
the paper shows it through entropy, and we call a head broad when its mean entropy exceeds 90 % of the
uniform entropy log(n) of the same rows (our threshold, stated in the atlas).

Shapes: every statistic (L, H), averaged over the query rows of the self-attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.core import entropy
from attention.models.model_attention import ModelAttention
from attention.models.tokens import is_punctuation

TYPE_THRESHOLD = 0.5
BROAD_FRACTION = 0.9

METRICS = {  # HeadStats field -> (label, what it measures)
    "entropy": ("entropy (nats)", "Mean entropy of the head's attention rows: low = focused, high = broad."),
    "special": ("on special tokens", "Share of attention on [CLS]/[SEP]/BOS (or the first token if none)."),
    "previous": ("on previous token", "Share on token i − 1."),
    "same": ("on itself", "Share on token i."),
    "next": ("on next token", "Share on token i + 1."),
    "punctuation": ("on punctuation", "Share on punctuation tokens."),
}


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

    def upper_bound(self, metric: str) -> float:
        """The largest value `metric` can take: uniform entropy for "entropy", 1 for a share."""
        return max(self.uniform_entropy, 1e-9) if metric == "entropy" else 1.0


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
