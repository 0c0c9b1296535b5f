"""What a visit looks at: one value, `Focus`, that every model page reads, changes and hands to the next.

A visitor types a sentence on Model heads, opens a head on the Head atlas, answers a question on Ambiguous
words and goes on to Inside one head: each page reads the same Focus, and a choice made on one page is the
choice on the next. The app keeps it in the session and in the URL (pages/_focus.py, the one module that
does); here it is plain data that a notebook can build too: no Streamlit, no torch.

    >>> f = Focus().with_text("I sat on the river bank.").replace(layer=2, head=4)
    >>> f.to_params()                      # what the URL holds: {"text": ..., "layer": "3", "head": "5"}
    >>> f.fitted(n_layers=6, n_heads=12, tokens=tokens)   # (Focus, notes): checked against a model's result

Counting: `layer`, `head` and token positions count from 0, as arrays do. The URL and the pages say
layer 3, head 5 ("L3H5") from 1; token positions are shown as the pickers show them, from 0 ("6: bank").
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass

DTYPES = ("auto", "float32", "bfloat16", "float16")  # load_model's precisions ("auto": attention.models.load_model)
IMAGE_FORMATS = ("png", "svg")  # what a chart's camera button saves
LINK_TEXT_CHARS = 2_000  # a longer text is not written into a URL (servers refuse request lines over ~16 KB)
VISIBLE_SPACE = "␣"  # how a space inside a token is shown in a box: " Mary" and "Mary" are different tokens
VISIBLE_BREAK = "⏎"  # how a line break inside a token is shown (a token "\n" drew as an empty bar label)


@dataclass(frozen=True)
class ModelChoice:
    """A model and the precision it runs in: one value, never a packed string."""

    name: str  # what load_model opens: a bundled model's key ("minilm"), "local:<root>/<folder>", or a hub id
    dtype: str = "auto"  # one of DTYPES

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("a model choice needs the model's name")
        if self.dtype not in DTYPES:
            raise ValueError(f"precision must be one of {', '.join(DTYPES)}, not {self.dtype!r}")


@dataclass(frozen=True)
class TokenAt:
    """A token picked in a text: its position and its text there. The text tells a position that a new
    sentence or another tokenizer gave to another token, instead of following that token silently."""

    position: int  # from 0
    token: str  # "" when not known yet (a link names only the position): filled in by Focus.fitted


@dataclass(frozen=True)
class WordPair:
    """One word in two sentences (Ambiguous words): does the word look at different things in each?"""

    a: str
    b: str
    word: str


@dataclass(frozen=True)
class Focus:
    """What the visit looks at. Every field has a default, and None means "the page's own default"."""

    model: ModelChoice | None = None  # None: the page's default model (MiniLM; SmolLM2 where a prediction is read)
    saved: str | None = None  # a result opened from a .npz file (its digest): pages show it instead of a model's
    other: ModelChoice | None = None  # the second model a comparison reads beside `model` (Compare two models);
    # None: that page's default
    text: str | None = None  # the sentence; None: the page's example sentence
    layer: int = 0
    head: int = 0  # the one head shown where a page shows one (always a head: see `aggregation`)
    head_picked: bool = False  # the visitor picked this layer and head (a click, a box, a link, a question); until
    # then a view that follows a ranked result shows its top head instead (`following`), kept here as shown
    aggregation: str = "head"  # how a layer's heads are shown: "head" (the one above) or "mean", "max", ...
    query: TokenAt | None = None  # the token followed; None: the page's default token
    words: bool = False  # the reading switches (attention.models.Reading): words, not pieces
    without_sinks: bool = False  # each head's sinks removed and rows rescaled
    log: bool = False  # weights coloured by log10
    target: str | None = None  # the contrast's expected next token, exactly as the tokenizer reads it (" Mary")
    foil: str | None = None  # its alternative (" John")
    corrupt: str | None = None  # the corrupted prompt patched into (What heads do)
    picked_for: str | None = None  # the text target, foil and corrupt were picked for: they hold for it alone
    # (`picks_hold`); for any other text the pages derive their own (attention.models.contrast_words)
    pair: WordPair | None = None  # Ambiguous words' two sentences; None: its first example
    image_format: str = "png"  # what the charts' camera button saves, one of IMAGE_FORMATS

    def __post_init__(self):
        for name in ("layer", "head"):
            value = getattr(self, name)
            try:  # a numpy integer from an array is a whole number too; a string or a float is not
                whole = None if isinstance(value, bool) else operator.index(value)
            except TypeError:
                whole = None
            if whole is None or whole < 0:
                raise ValueError(f"{name} must be a position from 0, not {value!r}")
            object.__setattr__(self, name, whole)  # a plain int, whatever whole number type it was given as
        if self.query is not None and (not isinstance(self.query, TokenAt) or self.query.position < 0):
            raise ValueError(f"query must be a TokenAt with a position from 0, not {self.query!r}")
        if self.image_format not in IMAGE_FORMATS:
            raise ValueError(f"image format must be one of {', '.join(IMAGE_FORMATS)}, not {self.image_format!r}")

    def replace(self, **changes) -> Focus:
        """A copy with some fields changed (dataclasses.replace, checked). Setting the layer or the head is
        picking a head (head_picked), unless head_picked is given too."""
        if ("layer" in changes or "head" in changes) and "head_picked" not in changes:
            changes["head_picked"] = True
        return dataclasses.replace(self, **changes)

    def following(self, layer: int, head: int) -> Focus:
        """The focus a view that follows a ranked result shows: the head the visitor picked, else the result's
        top head (layer, head, from 0), which is not a pick (the next ranking's top replaces it)."""
        if self.head_picked:
            return self
        return dataclasses.replace(self, layer=layer, head=head, aggregation="head")

    def picks_hold(self) -> bool:
        """Whether the target, foil and corrupted prompt picked (if any) were picked for the text in focus."""
        return self.picked_for == self.text

    def with_picks(self, text: str, **picks) -> Focus:
        """Target, foil or corrupt (picks, None: not picked) picked for `text`, the text on screen, which becomes
        the focus's text. Picks made for another text are dropped: they did not hold here."""
        kept = {} if self.picks_hold() and self.text == text else {"target": None, "foil": None, "corrupt": None}
        return self.replace(text=text, picked_for=text, **{**kept, **picks})

    def with_model(self, model: ModelChoice) -> Focus:
        """Another model (a result opened from a file is closed). The token followed stays: `fitted` finds it
        among the new model's tokens, or says it cannot."""
        return self if model == self.model and self.saved is None else self.replace(model=model, saved=None)

    def with_text(self, text: str) -> Focus:
        """Another sentence. The token followed stays: `fitted` finds it in the new sentence, or says it
        cannot."""
        return self if text == self.text else self.replace(text=text)

    def with_query(self, position: int, tokens) -> Focus:
        """Follow token `position` of `tokens` (the tokens the page shows)."""
        return self.replace(query=TokenAt(position, str(tokens[position])))

    def query_or(self, default: int) -> int:
        """The token followed, else the page's `default` position."""
        return default if self.query is None else self.query.position

    def fitted(self, *, n_layers: int, n_heads: int, tokens=None) -> tuple[Focus, tuple[str, ...]]:
        """This focus made valid for a model with n_layers x n_heads heads reading `tokens`, and a note in words
        for each thing changed: a layer or head past the model's last is clamped to it; a token followed that
        is now elsewhere (another sentence, another tokenizer) is followed there, the occurrence nearest its old
        position; one the text does not have is dropped (the page follows its default token)."""
        notes, changes = [], {}  # a layer or head clamped is not a pick: dataclasses.replace, not self.replace
        if self.layer >= n_layers:
            changes["layer"] = n_layers - 1
            notes.append(f"Layer {self.layer + 1} is past this model's {n_layers} layers: layer {n_layers} is shown.")
        if self.head >= n_heads:
            changes["head"] = n_heads - 1
            notes.append(f"Head {self.head + 1} is past this model's {n_heads} heads per layer: head {n_heads} is "
                         "shown.")
        if self.query is not None and tokens is not None:
            changes["query"], note = _found(self.query, [str(t) for t in tokens])
            notes += [note] if note else []
        return (dataclasses.replace(self, **changes) if changes else self), tuple(notes)

    # --- the URL ---------------------------------------------------------------------------------------------
    def to_params(self) -> dict[str, str]:
        """The query parameters that reopen this focus in a fresh session (layer and head from 1, as pages
        say them). A text over LINK_TEXT_CHARS is left out, and so is a result opened from a file: neither
        fits in a link."""
        out: dict[str, str] = {}
        if self.model is not None:
            out["model"] = self.model.name
            if self.model.dtype != "auto":
                out["precision"] = self.model.dtype
        if self.other is not None:
            out["model_b"] = self.other.name
            if self.other.dtype != "auto":
                out["precision_b"] = self.other.dtype
        if self.text is not None and len(self.text) <= LINK_TEXT_CHARS:
            out["text"] = self.text
        if self.head_picked or (self.layer, self.head) != (0, 0):  # a link shows the head on screen (picked
            out["layer"], out["head"] = str(self.layer + 1), str(self.head + 1)  # once opened, as a link names it)
        if self.aggregation != "head":
            out["agg"] = self.aggregation
        if self.query is not None:
            out["query"] = str(self.query.position)
        for name, field in (("words", "words"), ("no_sinks", "without_sinks"), ("log", "log")):
            if getattr(self, field):
                out[name] = "true"
        for name in ("target", "foil", "corrupt"):  # picks for another text do not hold: not in the link
            if getattr(self, name) is not None and self.picks_hold():
                out[name] = getattr(self, name)
        if self.pair is not None:
            out.update(pair_a=self.pair.a, pair_b=self.pair.b, pair_word=self.pair.word)
        if self.image_format != "png":
            out["images"] = self.image_format
        return out

    @classmethod
    def from_params(cls, params, base: Focus | None = None) -> tuple[Focus, tuple[str, ...]]:
        """The focus a link's query parameters name, and a note for each parameter that cannot be read (it
        is ignored). A link names a whole focus: what it leaves out takes its default, except what no link can
        hold, kept from `base`: a result opened from a file, a text too long for a link, the image format."""
        base = cls() if base is None else base
        notes: list[str] = []
        changes: dict = {"saved": base.saved, "image_format": base.image_format,
                         "text": base.text if base.text is not None and len(base.text) > LINK_TEXT_CHARS else None}

        def number(name: str, least: int) -> int | None:
            raw = params.get(name)
            if raw is None:
                return None
            try:
                value = int(str(raw).strip())
            except ValueError:
                value = None
            if value is None or value < least:
                notes.append(f"The link's {name} “{raw}” is not a whole number from {least}: it is ignored.")
                return None
            return value

        dtype = str(params.get("precision", "auto"))
        if dtype not in DTYPES:
            notes.append(f"The link's precision “{dtype}” is not one of {', '.join(DTYPES)}: auto is used.")
            dtype = "auto"
        if str(params.get("model", "")).strip():
            changes["model"], changes["saved"] = ModelChoice(str(params["model"])[:200], dtype), None
        dtype_b = str(params.get("precision_b", "auto"))
        if dtype_b not in DTYPES:
            notes.append(f"The link's precision_b “{dtype_b}” is not one of {', '.join(DTYPES)}: auto is used.")
            dtype_b = "auto"
        if str(params.get("model_b", "")).strip():
            changes["other"] = ModelChoice(str(params["model_b"])[:200], dtype_b)
        if "text" in params:
            changes["text"] = str(params["text"])
        for name in ("layer", "head"):
            value = number(name, 1)
            if value is not None:
                changes[name], changes["head_picked"] = value - 1, True
        if "agg" in params:
            changes["aggregation"] = str(params["agg"])
        position = number("query", 0)
        if position is not None:
            changes["query"] = TokenAt(position, "")
        for name, field in (("words", "words"), ("no_sinks", "without_sinks"), ("log", "log")):
            if name in params:
                changes[field] = str(params[name]).lower() == "true"
        for name in ("target", "foil", "corrupt"):
            if name in params:  # a link's picks are for the link's text
                changes[name], changes["picked_for"] = str(params[name]), changes["text"]
        if all(f"pair_{part}" in params for part in ("a", "b", "word")):
            changes["pair"] = WordPair(*(str(params[f"pair_{part}"]) for part in ("a", "b", "word")))
        if "images" in params:
            if params["images"] in IMAGE_FORMATS:
                changes["image_format"] = params["images"]
            else:
                notes.append(f"The link's image format “{params['images']}” is not png or svg: it is ignored.")
        return cls(**changes), tuple(notes)


def _found(query: TokenAt, tokens: list[str]) -> tuple[TokenAt | None, str | None]:
    """Where the token followed is in `tokens` (Focus.fitted), and a note when it moved or is gone."""
    at, token, n = query.position, query.token, len(tokens)
    if not token:  # a link names the position only
        if at < n:
            return TokenAt(at, tokens[at]), None
        return None, f"This text has {n} tokens, so there is no token {at} to follow: the page's default token is."
    if at < n and tokens[at] == token:
        return query, None
    for same in (str.__eq__, lambda a, b: a.lower() == b.lower()):  # MiniLM lowercases what SmolLM2 does not
        found = [j for j, t in enumerate(tokens) if same(t, token)]
        if found:
            j = min(found, key=lambda j: (abs(j - at), j))
            return TokenAt(j, tokens[j]), (f"The token you were following, “{token}”, is token {j} in this text "
                                            f"(it was token {at}): the charts follow it there.")
    return None, f"“{token}” is not among this text's tokens: the page's default token is followed."


PARAMS = ("model", "precision", "model_b", "precision_b", "text", "layer", "head", "agg", "query", "words", "no_sinks",
          "log", "target", "foil", "corrupt", "pair_a", "pair_b", "pair_word", "images")  # what Focus.to_params writes


def with_visible_spaces(token: str) -> str:
    """A token's text as a box shows it: each space drawn as ␣, so that " Mary" does not look like "Mary", and
    each line break as ⏎."""
    return token.replace(" ", VISIBLE_SPACE).replace("\n", VISIBLE_BREAK)


def from_visible_spaces(shown: str) -> str:
    """What a box shows (with ␣ and ⏎, or plain spaces) back into the token's text."""
    return shown.replace(VISIBLE_SPACE, " ").replace(VISIBLE_BREAK, "\n")
