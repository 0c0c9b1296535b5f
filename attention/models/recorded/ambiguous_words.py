"""One word in two sentences (the "Ambiguous words" page): where it looks in each, which heads change
most, and how far apart its two vectors drift, layer by layer.

The two sentences may differ in length, so attention is compared over token *strings*: a string's
weight is the sum over its occurrences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.models.forward.model_attention import ModelAttention, shown_tokens
from attention.models.forward.tokens import find_word
from attention.models.recorded.aggregations import attention_row


def token_distribution_shift(a_tokens, a_weights: np.ndarray, b_tokens, b_weights: np.ndarray) -> np.ndarray:
    """Total-variation distance between two attention rows compared over token strings, per head.

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

    def rows(self, layer: int, head: int | None) -> tuple[np.ndarray, np.ndarray]:
        """The word's attention row in sentence a and in sentence b (head None: mean over heads).

        Shapes: -> (n_a,), (n_b,)
        """
        return (attention_row(self.a, self.ia, layer=layer, head=head),
                attention_row(self.b, self.ib, layer=layer, head=head))


def compare_word(a: ModelAttention, b: ModelAttention, word: str) -> WordComparison:
    """One word in two sentences: how far its attention moved (layer by layer) and how alike its hidden states
    stay (cosine per layer)."""
    ia, ib = find_word(a.tokens, word), find_word(b.tokens, word)
    shift = token_distribution_shift(a.tokens, a.self_attn.query_rows(ia), b.tokens, b.self_attn.query_rows(ib))
    cosine = cosine_per_layer(a.hidden[:, ia], b.hidden[:, ib])
    return WordComparison(a=a, b=b, ia=ia, ib=ib, shift=shift, cosine=cosine)


def difference_by_token(cmp: WordComparison, layer: int, head: int | None) -> tuple[list[str], np.ndarray]:
    """Attention of the word on each distinct token string, sentence a minus sentence b.

    head None averages the heads. Shapes: -> (strings, (k,) differences), largest |difference| first.
    """
    wa, wb = cmp.rows(layer, head)
    a, b = shown_tokens(cmp.a), shown_tokens(cmp.b)  # " bank" and "bank" are two tokens: two strings ("␣bank")
    vocab = sorted(set(a) | set(b))
    diff = np.zeros(len(vocab))
    for j, t in enumerate(a):
        diff[vocab.index(t)] += wa[j]
    for j, t in enumerate(b):
        diff[vocab.index(t)] -= wb[j]
    order = np.argsort(-np.abs(diff))
    return [vocab[o] for o in order], diff[order]
