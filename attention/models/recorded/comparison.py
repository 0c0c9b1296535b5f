"""Two results of one text compared head by head: how far each head's weights moved.

For each head, the distance is the mean over query rows of the Jensen–Shannon divergence (base 2: 0 for the
same row, 1 for rows with no key in common) between the two results' weight rows. Same tokens and layout
(one model in two precisions, two checkpoints of one tokenizer): each head against the same head of the other.
Two models or tokenizers (`words=True`): rows and keys grouped into the text's words (attention.models.
word_level; special tokens left out and each row rescaled to sum to 1), and each head of A matched to its
nearest head of B.

    >>> from attention.models import compare_heads
    >>> cmp = compare_heads(att_float32, att_bfloat16)
    >>> cmp.largest(5)        # [(layer, head, distance)], 0-based, largest first

Shapes: L layers, H heads (of A; B's are Lb, Hb), n rows, m keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.models.forward.model_attention import ModelAttention
from attention.models.recorded.words import word_level


@dataclass(frozen=True)
class HeadComparison:
    """How far each head of A is from B."""

    labels: tuple[str, ...]  # the tokens (or words) both results were compared on
    distance: np.ndarray  # (L, H) mean JSD of each head of A from the same head of B (or, matched, its nearest)
    words: bool  # compared on words (two models or tokenizers)
    match: np.ndarray | None = None  # (L, H, 2) int: B's (layer, head) nearest each head of A (words=True)
    match_distance: np.ndarray | None = None  # (L, H) its distance (words=True)

    def largest(self, k: int = 10) -> list[tuple[int, int, float]]:
        """The k heads that moved most: [(layer, head, distance)], 0-based, largest first."""
        flat = np.argsort(-self.distance, axis=None, kind="stable")[:k]
        return [(int(i), int(j), float(self.distance[i, j]))
                for i, j in zip(*np.unravel_index(flat, self.distance.shape), strict=True)]


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen–Shannon divergence in bits between rows of weights. Shapes: p, q (..., m) -> (...)."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    mid = (p + q) / 2

    def kl(a):
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(a > 0, a * np.log2(a / mid), 0.0)
        return terms.sum(axis=-1)

    return np.clip((kl(p) + kl(q)) / 2, 0.0, 1.0)


def compare_heads(att_a: ModelAttention, att_b: ModelAttention, *, words: bool = False) -> HeadComparison:
    """Every head of `att_a` against `att_b` on the same text (module docstring). ValueError when the two
    cannot be compared: other tokens (words=False), other words (words=True)."""
    if not words:
        if tuple(att_a.tokens) != tuple(att_b.tokens):
            raise ValueError("the two results have different tokens: compare them on words (words=True)")
        if (att_a.n_layers, att_a.n_heads) != (att_b.n_layers, att_b.n_heads):
            raise ValueError(f"A has {att_a.n_layers} layers × {att_a.n_heads} heads and B {att_b.n_layers} × "
                             f"{att_b.n_heads}: compare them on words (words=True), each head matched")
        distance = np.stack([js_divergence(_layer(att_a, layer), _layer(att_b, layer)).mean(axis=-1)
                             for layer in range(att_a.n_layers)])  # (L, H)
        return HeadComparison(tuple(att_a.tokens), distance, words=False)
    labels, wa = _words(att_a)
    labels_b, wb = _words(att_b)
    if [w.lower() for w in labels] != [w.lower() for w in labels_b]:
        raise ValueError(f"the two results read different words ({len(labels)} and {len(labels_b)}): they must "
                         "be of the same text")
    pair = np.empty(wa.shape[:2] + wb.shape[:2])  # (L, H, Lb, Hb): every head of A against every head of B
    for layer in range(wa.shape[0]):  # a head of A at a time: (Lb, Hb, W, W) in memory, not (L, H, Lb, Hb, W, W)
        for head in range(wa.shape[1]):
            pair[layer, head] = js_divergence(wa[layer, head][None, None], wb).mean(axis=-1)
    nearest = pair.reshape(*pair.shape[:2], -1).argmin(axis=-1)  # (L, H) into B's flat heads
    match = np.stack(np.unravel_index(nearest, pair.shape[2:]), axis=-1)  # (L, H, 2)
    match_distance = np.take_along_axis(pair.reshape(*pair.shape[:2], -1), nearest[..., None], -1)[..., 0]
    same = wa.shape[:2] == wb.shape[:2]
    distance = np.einsum("lhlh->lh", pair) if same else match_distance
    return HeadComparison(labels, distance, words=True, match=match, match_distance=match_distance)


def _layer(att: ModelAttention, layer: int) -> np.ndarray:
    """(H, n, m) float64 weights of one layer."""
    return np.stack([att.head_weights(layer, h) for h in range(att.n_heads)]).astype(np.float64)


def _words(att: ModelAttention) -> tuple[tuple[str, ...], np.ndarray]:
    """The text's words without special tokens, and (L, H, W, W) weights between them, rows rescaled to 1."""
    w = word_level(att)
    keep = ~np.asarray(w.special, bool)
    weights = w.weights[:, :, keep][:, :, :, keep].astype(np.float64)
    total = weights.sum(axis=-1, keepdims=True)
    weights = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
    return tuple(word for word, k in zip(w.words, keep, strict=True) if k), weights
