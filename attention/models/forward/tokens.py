"""Tokens as people read them: display strings, special and punctuation flags, finding a word.

Shapes: ids (n,) -> n display strings and an (n,) bool flag.
"""

from __future__ import annotations

import unicodedata

import numpy as np


def display_tokens(tokenizer, ids) -> tuple[tuple[str, ...], np.ndarray]:
    """Readable token strings (no `##`, `Ġ`, `▁`) and a special-token flag per token.

    Shapes: ids (n,) -> n strings, (n,) bool.
    """
    ids = [int(i) for i in ids]
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    pieces = tokenizer.convert_ids_to_tokens(ids)
    out = []
    for i, piece in zip(ids, pieces, strict=True):
        piece = "" if piece is None else str(piece)
        if i in special_ids:
            out.append(piece)
            continue
        text = piece[2:] if piece.startswith("##") else tokenizer.convert_tokens_to_string([piece])
        text = text.replace("▁", " ").replace("\n", "⏎").strip()
        out.append(text or "␣")
    return tuple(out), np.array([i in special_ids for i in ids], dtype=bool)


def is_punctuation(token: str) -> bool:
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


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


def default_focus(tokens, word: str = "bank") -> int:
    """The token a page follows first: `word` when the sentence has it (the seeds' "bank"), else token 0."""
    return next((i for i, t in enumerate(tokens) if t.lower() == word), 0)


def last_word(tokens, special) -> int:
    """The last token that is neither special ([CLS], [SEP]) nor punctuation, else 0: a sentence's last
    word, the one an encoder's vector metric follows when nothing else is chosen."""
    for i in range(len(tokens) - 1, -1, -1):
        if not special[i] and not is_punctuation(tokens[i]):
            return i
    return 0


def encoding_words(encoding, n: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The tokenizer's word index and character span of each of the first n tokens of a batch of one
    (a transformers BatchEncoding, asked for offsets). Shapes: -> (n,) int, -1 = no word (special token);
    (n, 2) int. (None, None) for a tokenizer without them (a slow, Python tokenizer)."""
    if not getattr(encoding, "is_fast", False) or "offset_mapping" not in encoding:
        return None, None
    ids = encoding.word_ids(0)[:n]
    offsets = np.asarray(encoding["offset_mapping"][0][:n], dtype=np.int64).reshape(-1, 2)
    return np.array([-1 if w is None else w for w in ids], dtype=np.int64), offsets
