"""One word in two sentences: where it looks in each, which heads change most, how its vector drifts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.extract import ModelAttention
from attention.stats import cosine_per_layer, token_distribution_shift


def find_word(tokens, word: str) -> int:
    """Index of the first token equal to `word` (case-insensitive), else the first starting with it."""
    w = word.strip().lower()
    if not w:
        raise ValueError("Choose a word to follow.")
    lowered = [t.lower() for t in tokens]
    for candidates in (lambda t: t == w, lambda t: t.startswith(w) or w.startswith(t) and len(t) > 2):
        for i, t in enumerate(lowered):
            if candidates(t):
                return i
    raise ValueError(f"“{word}” is not among the tokens: {' '.join(tokens)}")


@dataclass(frozen=True)
class WordComparison:
    a: ModelAttention
    b: ModelAttention
    ia: int  # index of the word in sentence a
    ib: int
    shift: np.ndarray  # (L, H) total-variation distance between the word's attention rows, over token strings
    cosine: np.ndarray  # (L + 1,) cosine similarity of the word's hidden vectors, embeddings first

    def top_heads(self, k: int = 10) -> list[tuple[int, int, float]]:
        """The k (layer, head, shift) with the largest shift, 0-based indices."""
        order = np.argsort(self.shift, axis=None)[::-1][:k]
        return [(int(i // self.shift.shape[1]), int(i % self.shift.shape[1]), float(self.shift.flat[i]))
                for i in order]


def compare_word(a: ModelAttention, b: ModelAttention, word: str) -> WordComparison:
    ia, ib = find_word(a.tokens, word), find_word(b.tokens, word)
    shift = token_distribution_shift(a.tokens, a.weights[:, :, ia, :], b.tokens, b.weights[:, :, ib, :])
    cosine = cosine_per_layer(a.hidden[:, ia], b.hidden[:, ib])
    return WordComparison(a=a, b=b, ia=ia, ib=ib, shift=shift, cosine=cosine)


def difference_by_token(cmp: WordComparison, layer: int, head: int | None) -> tuple[list[str], np.ndarray]:
    """Attention of the word on each distinct token string, sentence a minus sentence b.

    head None averages the heads. Shapes: -> (strings, (k,) differences), largest |difference| first.
    """
    def row(att, i):
        w = att.weights[layer, :, i, :]
        return w.mean(0) if head is None else w[head]

    wa, wb = row(cmp.a, cmp.ia), row(cmp.b, cmp.ib)
    vocab = sorted(set(cmp.a.tokens) | set(cmp.b.tokens))
    diff = np.zeros(len(vocab))
    for j, t in enumerate(cmp.a.tokens):
        diff[vocab.index(t)] += wa[j]
    for j, t in enumerate(cmp.b.tokens):
        diff[vocab.index(t)] -= wb[j]
    order = np.argsort(-np.abs(diff))
    return [vocab[o] for o in order], diff[order]
