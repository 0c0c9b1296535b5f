"""Words, not pieces: a model's attention merged over the sub-word pieces of each word.

The grouping is the tokenizer's own (its word ids, from its pre-tokenizer), not a rule about `##`, `Ġ`
or `▁`, so BERT WordPiece, byte-level BPE (GPT-2, SmolLM2) and SentencePiece read the same way, CJK and
emoji included: a word is whatever the tokenizer split the text into before cutting it into pieces.
Special tokens ([CLS], [SEP], BOS) are words of their own.

Merging keeps rows distributions:
    attention *to* word b   = the sum of the weights on b's pieces            (columns add)
    attention *from* word a = the mean of the rows of a's pieces               (rows average)
so W[a, b] = 1/|a| Σ_{i∈a} Σ_{j∈b} A[i, j], and each row of W still sums to 1.

Shapes: n tokens, W words; L layers, H heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.models.forward.model_attention import ModelAttention

WORD_LEVEL_MAX_TOKENS = 512  # word_level() holds every layer and head: (L, H, W, W) floats


@dataclass(frozen=True)
class WordGroups:
    """Which tokens make each word. Shapes: W words."""

    words: tuple[str, ...]  # the text of each word as written ("unbelievably"); a special token's own string
    pieces: tuple[tuple[int, ...], ...]  # token indices of each word, in order
    special: np.ndarray  # (W,) bool: the word is a special token

    @property
    def n_pieces(self) -> int:
        return sum(len(p) for p in self.pieces)

    def _rows(self) -> np.ndarray:
        """(W, n) averaging matrix: row a holds 1/|a| on a's pieces."""
        out = np.zeros((len(self.pieces), self.n_pieces))
        for a, group in enumerate(self.pieces):
            out[a, list(group)] = 1.0 / len(group)
        return out

    def _columns(self) -> np.ndarray:
        """(n, W) summing matrix: column b holds 1 on b's pieces."""
        out = np.zeros((self.n_pieces, len(self.pieces)))
        for b, group in enumerate(self.pieces):
            out[list(group), b] = 1.0
        return out

    def merge(self, matrix: np.ndarray) -> np.ndarray:
        """Rows averaged and columns summed over each word's pieces. Shapes: (..., n, n) -> (..., W, W)."""
        return self._rows() @ np.asarray(matrix, dtype=np.float64) @ self._columns()

    def merge_columns(self, matrix: np.ndarray) -> np.ndarray:
        """Columns (keys) summed over each word's pieces. Shapes: (..., r, n) -> (..., r, W)."""
        return np.asarray(matrix, dtype=np.float64) @ self._columns()

    def merge_mask(self, mask: np.ndarray | None) -> np.ndarray | None:
        """(n, n) bool -> (W, W) bool: a word pair is visible when any of its piece pairs is."""
        return None if mask is None else self.merge(np.asarray(mask, dtype=np.float64)) > 0

    def word_of(self, token: int) -> int:
        """The index of the word holding token `token`."""
        return next(a for a, group in enumerate(self.pieces) if token in group)

    def restricted(self, keep: np.ndarray) -> WordGroups:
        """The groups over the kept tokens only (e.g. with special tokens hidden), renumbered 0..k-1; words
        left with no piece are dropped. Shapes: keep (n,) bool."""
        new_index = np.cumsum(keep) - 1
        words, pieces, special = [], [], []
        for word, group, sp in zip(self.words, self.pieces, self.special, strict=True):
            kept = tuple(int(new_index[i]) for i in group if keep[i])
            if kept:
                words.append(word)
                pieces.append(kept)
                special.append(sp)
        return WordGroups(tuple(words), tuple(pieces), np.array(special, dtype=bool))


def word_groups(att: ModelAttention) -> WordGroups:
    """The words of `att`'s text, from the word ids and offsets its tokenizer gave. ValueError when the
    tokenizer gave none (slow tokenizers)."""
    if att.word_ids is None or att.offsets is None:
        raise ValueError(f"{att.model_name}'s tokenizer does not say which pieces make a word (it has no fast "
                         "version), so the word view is not available for it.")
    words, pieces, special = [], [], []
    previous = None
    for i, word_id in enumerate(att.word_ids.tolist()):
        if word_id >= 0 and word_id == previous:
            pieces[-1].append(i)
        else:
            pieces.append([i])
            special.append(bool(att.special[i]) or word_id < 0)
        previous = word_id if word_id >= 0 else None
    for group in pieces:
        start, end = int(att.offsets[group[0], 0]), int(att.offsets[group[-1], 1])
        text = att.text[start:end].strip() if end > start else ""
        words.append(text or "".join(att.tokens[i] for i in group))
    return WordGroups(tuple(words), tuple(tuple(g) for g in pieces), np.array(special, dtype=bool))


@dataclass(frozen=True)
class WordAttention:
    """A model's self-attention between words. Shapes: L layers, H heads, W words."""

    words: tuple[str, ...]
    pieces: tuple[tuple[int, ...], ...]  # token indices of each word
    special: np.ndarray  # (W,) bool
    weights: np.ndarray  # (L, H, W, W): to a word the sum over its pieces, from a word the mean; rows sum to 1


def word_level(att: ModelAttention, *, max_tokens: int = WORD_LEVEL_MAX_TOKENS) -> WordAttention:
    """Every layer and head of `att`'s self-attention between words (module docstring), a layer at a time.
    Holds (L, H, W, W) floats, so texts over max_tokens are refused; pages merge one matrix at a time
    (WordGroups.merge) at any length."""
    groups = word_groups(att)
    n = len(att.tokens)
    if n > max_tokens:
        raise ValueError(f"word_level keeps every layer and head: up to {max_tokens:,} tokens; this text has {n:,}. "
                         "Merge one head at a time with word_groups(att).merge(att.head_weights(layer, head)).")
    s = att.self_attn
    out = np.empty((s.n_layers, s.n_heads, len(groups.words), len(groups.words)), np.float32)
    for layer in range(s.n_layers):
        out[layer] = groups.merge(s.layer_weights(layer).cpu().numpy())
    return WordAttention(groups.words, groups.pieces, groups.special, out)
