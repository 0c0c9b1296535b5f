"""Tokens as people read them: display strings, special and punctuation flags, finding a word.

Shapes: ids (n,) -> n display strings and an (n,) bool flag.
"""

from __future__ import annotations

import unicodedata

import numpy as np

from attention.focus import VISIBLE_SPACE


def display_tokens(tokenizer, ids) -> tuple[tuple[str, ...], np.ndarray]:
    """Readable token strings (no `##`, `Ġ`, `▁`) and a special-token flag per token.

    Shapes: ids (n,) -> n strings, (n,) bool.
    """
    ids = ids.tolist() if hasattr(ids, "tolist") else [int(i) for i in ids]
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    distinct = list(dict.fromkeys(ids))  # each id converted once (a long text repeats most of its ids)
    piece_of = dict(zip(distinct, tokenizer.convert_ids_to_tokens(distinct), strict=True))
    pieces = [piece_of[i] for i in ids]
    out, shown = [], {}  # piece -> its display string: a long text repeats its pieces (2,048 tokens: 18 -> 4 ms)
    for i, piece in zip(ids, pieces, strict=True):
        piece = "" if piece is None else str(piece)
        if i in special_ids:
            out.append(piece)
            continue
        if piece not in shown:
            text = piece[2:] if piece.startswith("##") else tokenizer.convert_tokens_to_string([piece])
            if "\ufffd" in text:  # a piece of a character (an emoji's bytes split over tokens): "�" for each
                text = _bytes_of(piece) or text
            shown[piece] = text.replace("▁", " ").replace("\n", "⏎").strip() or "␣"
        out.append(shown[piece])
    return tuple(out), np.array([i in special_ids for i in ids], dtype=bool)


def out_of_text_labels(tokenizer, ids) -> tuple[str, ...]:
    """Labels of tokens read without their text (a prediction, the logit lens's top token at each layer): each
    display string (display_tokens) with VISIBLE_SPACE in front where the token itself begins with a space (its
    decoded text does: " Paris" is "␣Paris", "Paris" stays), as spaced_labels marks tokens inside a text.
    Shapes: ids (n,) -> n strings."""
    shown, _ = display_tokens(tokenizer, ids)
    ids = ids.tolist() if hasattr(ids, "tolist") else [int(i) for i in ids]
    return tuple(VISIBLE_SPACE + label if tokenizer.decode([i])[:1] == " " and not is_blank(label) else label
                 for i, label in zip(ids, shown, strict=True))


def spaced_labels(tokens, text: str, offsets) -> tuple[str, ...]:
    """Token labels as every page shows them: each display string (display_tokens) with VISIBLE_SPACE (␣) in
    front where the token begins with a space in `text` (its character span in `offsets` starts with one).
    " the" and "the" are two tokens to the model, and without the mark they look alike (the glossary's "␣").
    Tokens with an empty span (special tokens), blank tokens, and tokens whose span holds no space (BERT's
    WordPiece leaves spaces out of its tokens) are shown as they are. Shapes: tokens n, offsets (n, 2)."""
    shown = []
    for token, (start, end) in zip(tokens, np.asarray(offsets).reshape(-1, 2).tolist(), strict=False):
        spaced = end > start and text[start:start + 1] == " " and not is_blank(token)
        shown.append(VISIBLE_SPACE + token if spaced else token)
    return (*shown, *tokens[len(shown):])


def text_pieces(tokens, text: str, offsets, special=None) -> tuple[str, ...]:
    """Each token as it stands in `text` for a line of context: its display string after the spacing the text
    has before it (one space for any run of spaces or line breaks between two tokens, none inside a word), so
    that the pieces joined with "" read as the text, as the tokenizer decodes it: "saddle" + "s" is "saddles",
    "bank" + "," is "bank,". A special token (an empty span) stands apart: "[CLS] the". Shapes: n tokens,
    offsets (n, 2), special (n,) bool or None."""
    pieces, last = [], None  # the end of the span before (None: no text yet)
    for i, (token, (start, end)) in enumerate(zip(tokens, np.asarray(offsets).reshape(-1, 2).tolist(),
                                                  strict=False)):
        if end <= start or (special is not None and special[i]):
            pieces.append(("" if i == 0 else " ") + token + (" " if i == 0 else ""))
            continue
        before = text[last:start] if last is not None and start > last else ""
        spaced = last is not None and (bool(before) or text[start:start + 1].isspace())
        pieces.append((" " if spaced else "") + token)
        last = max(end, last or 0)
    return (*pieces, *(" " + t for t in tokens[len(pieces):]))


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
    """A token made of punctuation alone ("." or "),"), as Unicode classes it."""
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


def default_focus(tokens, word: str = "bank", special=None) -> int:
    """The token a page follows first: `word` when the sentence has it (the seeds' "bank"), else the last word
    when `special` (one flag per token) is given (last_word), else token 0. Token 0 is [CLS] in an encoder and,
    in a decoder, a token that sees only itself: every head's weight 1.0, nothing to compare."""
    found = next((i for i, t in enumerate(tokens) if t.lower() == word), None)
    if found is not None:
        return found
    return 0 if special is None else last_word(tokens, special)


def last_word(tokens, special) -> int:
    """The last token that is neither special ([CLS], [SEP]), punctuation nor blank (a space or a line break,
    shown "␣" or "⏎": a pasted text often ends with one), else 0: a sentence's last word, the one an encoder's
    vector metric follows when nothing else is chosen."""
    for i in range(len(tokens) - 1, -1, -1):
        if not special[i] and not is_punctuation(tokens[i]) and not is_blank(tokens[i]):
            return i
    return 0


def is_blank(token: str) -> bool:
    """Only spaces and line breaks, as display_tokens shows them ("␣", "⏎") or raw."""
    return all(c in "␣⏎" or c.isspace() for c in token)


def encoding_words(encoding, n: int, text: str | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The tokenizer's word index and character span of each of the first n tokens of a batch of one
    (a transformers BatchEncoding, asked for offsets). Shapes: -> (n,) int, -1 = no word (special token);
    (n, 2) int. (None, None) for a tokenizer without them (a slow, Python tokenizer).

    A tokenizer without a pre-tokenizer (Gemma 3's, read from its GGUF file: SentencePiece over the whole
    text) calls the whole text one word. Where its word ids hold a piece that starts after a space inside a
    word, and `text` is given, the words are read from the offsets instead (words_from_offsets)."""
    if not getattr(encoding, "is_fast", False) or "offset_mapping" not in encoding:
        return None, None
    ids = np.array([-1 if w is None else w for w in encoding.word_ids(0)[:n]], dtype=np.int64)
    offsets = np.asarray(encoding["offset_mapping"][0][:n], dtype=np.int64).reshape(-1, 2)
    if text is not None and _spaces_inside_words(ids, offsets, text):
        ids = words_from_offsets(offsets, ids < 0, text)
    return ids, offsets


def _starts_after_space(offsets: np.ndarray, i: int, text: str) -> bool:
    start, end = int(offsets[i, 0]), int(offsets[i, 1])
    return end > start and (text[start].isspace() or (start > 0 and text[start - 1].isspace()))


def _spaces_inside_words(ids: np.ndarray, offsets: np.ndarray, text: str) -> bool:
    """Some piece continues the word before it although it starts after a space."""
    return any(ids[i] >= 0 and ids[i] == ids[i - 1] and _starts_after_space(offsets, i, text)
               for i in range(1, len(ids)))


def words_from_offsets(offsets: np.ndarray, special: np.ndarray, text: str) -> np.ndarray:
    """Word ids read from the text: a piece starts a word after a space, where letters and digits meet other
    signs (as GPT-2's and BERT's pre-tokenizers split "water." into "water" and "."), and after a special
    token. Shapes: offsets (n, 2), special (n,) bool -> (n,) int, -1 for special tokens."""
    out = np.full(len(offsets), -1, dtype=np.int64)
    word, last = -1, None  # the last character of the piece before (None: none, or a special token)
    for i, (start, end) in enumerate(np.asarray(offsets).tolist()):
        piece = text[start:end] if end > start else ""
        if special[i] or not piece.strip():
            if special[i]:
                last = None
            elif piece:  # only spaces: they end the word
                last = " "
            out[i] = -1 if special[i] else max(word, 0)
            continue
        first = piece.lstrip()[0]
        if last is None or _starts_after_space(offsets, i, text) or last.isspace() \
                or first.isalnum() != last.isalnum():
            word += 1
        out[i] = word
        last = piece[-1]
    return out
