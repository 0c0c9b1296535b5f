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
        if "\ufffd" in text:  # a piece of a character (an emoji's bytes split over tokens): "�" for each
            text = _bytes_of(piece) or text
        text = text.replace("▁", " ").replace("\n", "⏎").strip()
        out.append(text or "␣")
    return tuple(out), np.array([i in special_ids for i in ids], dtype=bool)


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE writes each byte as one printable character (Radford et al. 2019's
    bytes_to_unicode): character -> byte, to read back the bytes of a piece that is part of a character."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


BYTE_LEVEL = _byte_level_alphabet()


def _bytes_of(piece: str) -> str | None:
    """A byte-level piece that is not a whole character, as its bytes in hex ("⟨f0 9f⟩"); None when the piece
    is not written in that alphabet (another tokenizer's)."""
    if not piece or any(c not in BYTE_LEVEL for c in piece):
        return None
    return "⟨" + " ".join(f"{BYTE_LEVEL[c]:02x}" for c in piece) + "⟩"


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
