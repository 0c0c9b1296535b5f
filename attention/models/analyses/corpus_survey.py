"""A head across a corpus: one pass over many texts, and what each head does over all of them.

`corpus_survey(loaded, texts)` runs the model on each text (attend(): our kernel, the survey summed in the
pass; each text cut at MAX_TOKENS tokens) and keeps, per head, with memory bounded by the largest text:
    top examples    the k largest weights (text, query position, key position) over the corpus: a running
                    top-k per head, merged text by text, never every weight. Keys that are special tokens
                    or the first token (where attention sinks) are skipped unless include_sinks.
    statistics      each text's survey numbers (attention.models.forward.head_survey): entropy, sink mass,
                    previous-token share, mean distance, so each has a distribution over texts, (T, L, H)
    a sample        the queries and keys of up to SAMPLE_POINTS token positions, the same positions for every
                    head, for the joint projection of a head's queries and keys (attention.models.analyses.
                    qk_projection): each position that is not a special token draws a priority from a
                    generator seeded by (seed, text), and the SAMPLE_POINTS lowest are kept, a uniform sample
                    that does not depend on how the corpus was cut into parts

Surveys of two parts of a corpus merge into the survey of the whole (merge_surveys: top-k of the union, the
statistics one after the other, the lowest priorities): a long job saves its part every few texts and a
job that stopped resumes where it was (survey_file).

The result saves to one .safetensors file (CorpusSurvey.save; load_corpus_survey): arrays any numpy or
torch reads with the safetensors package, and a JSON header (texts, tokens, model, settings) under the
"corpus_survey" key of its metadata; no pickle.

Shapes: T texts, L layers, H heads, H_kv KV heads, k examples per head, P sampled positions, d head size.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attention.models.analyses.corpus import MAX_TOKENS
from attention.models.analyses.corpus_pass import CorpusPass
from attention.models.analyses.saved_file import read_saved
from attention.models.forward.capabilities import require
from attention.models.forward.model import LoadedModel
from attention.models.forward.running import attend
from attention.models.forward.tokens import display_tokens, spaced_labels, text_pieces
from attention.naming import head_words

TOP_K = 20  # top examples kept per head
SAMPLE_POINTS = 1_500  # token positions whose queries and keys are kept for the projection
CONTEXT = 3  # tokens shown before the first and after the last of a top example's query and key
BETWEEN = 4  # tokens between them shown whole up to this many; more are cut in the middle ("…")
STATISTICS = ("entropy", "mean_distance", "previous", "sink_mass")  # HeadSurvey fields kept per text (their
# labels and meanings: attention.models.forward.head_survey.METRICS)
FORMAT = "attention-explorer corpus survey 1"  # the header's "format": what load_corpus_survey reads


@dataclass(frozen=True)
class TopExample:
    """One of a head's largest weights over the corpus: `query` attends to `key` (token positions in text
    `text_index`, from 0) with `weight`."""

    text_index: int
    query: int
    key: int
    weight: float


@dataclass(frozen=True)
class CorpusSurvey:
    """What every head of one model does over a corpus (module docstring)."""

    model_name: str
    texts: tuple[str, ...]  # (T,) as read
    tokens: tuple[tuple[str, ...], ...]  # (T,) each text's tokens as shown, after the cut at max_tokens
    truncated: int  # texts longer than max_tokens tokens (read up to it)
    max_tokens: int
    include_sinks: bool  # top examples may land on special tokens and the first token
    top_text: np.ndarray  # (L, H, k) int32, largest weight first; -1 where the corpus had fewer candidates
    top_query: np.ndarray  # (L, H, k) int32
    top_key: np.ndarray  # (L, H, k) int32
    top_weight: np.ndarray  # (L, H, k) float32
    statistics: dict[str, np.ndarray]  # name (a STATISTICS field) -> (T, L, H) float32, one value per text
    sample_text: np.ndarray  # (P,) int32: the text of each sampled position
    sample_position: np.ndarray  # (P,) int32: its token position there
    sample_priority: np.ndarray  # (P,) float64: the priority it drew (the lowest are kept), for merging
    q_sample: np.ndarray | None  # (L, H, P, d) float16 queries there (after rotary); None: not captured
    k_sample: np.ndarray | None  # (L, H_kv, P, d) float16 keys there
    spans: np.ndarray | None = None  # (N, 2) int32: each token's character span in its text, the texts' tokens one
    # after another as in `tokens` (N tokens in all; (0, 0) for special tokens); None: not recorded (a survey
    # saved before they were, or a tokenizer without offsets), and tokens are then joined with spaces
    projection_cache: dict = field(default_factory=dict, repr=False, compare=False)  # (layer, head) -> QKProjection

    @property
    def n_layers(self) -> int:
        return self.top_weight.shape[0]

    @property
    def n_heads(self) -> int:
        return self.top_weight.shape[1]

    def top_examples(self, layer: int, head: int, k: int | None = None) -> list[TopExample]:
        """The head's k largest weights over the corpus, largest first (0-based layer and head)."""
        if not (0 <= layer < self.n_layers and 0 <= head < self.n_heads):
            raise ValueError(f"{head_words(layer, head)} is outside {self.n_layers} x {self.n_heads}")
        found = [TopExample(int(t), int(q), int(j), float(w)) for t, q, j, w in
                 zip(self.top_text[layer, head], self.top_query[layer, head], self.top_key[layer, head],
                     self.top_weight[layer, head], strict=True) if t >= 0]
        return found[:k]

    def median(self, name: str) -> np.ndarray:
        """(L, H) each head's median of a statistic over the texts: the point it takes on the map."""
        return np.median(self.statistics[name], axis=0)

    def _spans(self, text: int) -> np.ndarray | None:
        """(n, 2) the character spans of text `text`'s tokens, or None when not recorded."""
        if self.spans is None:
            return None
        return self.spans[self._starts[text]:self._starts[text + 1]]

    @functools.cached_property
    def _starts(self) -> np.ndarray:
        """(T + 1,) where each text's tokens begin in `spans` (computed once)."""
        return np.cumsum([0, *(len(t) for t in self.tokens)])

    def labels(self, text: int) -> tuple[str, ...]:
        """Text `text`'s tokens as every page labels them: " saddle" as "␣saddle" (attention.models.forward.tokens.
        spaced_labels); as they are where the spans were not recorded."""
        spans = self._spans(text)
        tokens = self.tokens[text]
        return tuple(tokens) if spans is None else spaced_labels(tokens, self.texts[text], spans)

    def pieces(self, text: int) -> tuple[str, ...]:
        """Text `text`'s tokens as pieces of a line of context, each after the spacing the text has before it:
        joined with "" they read as the text, as the tokenizer decodes it (text_pieces). Where the spans were
        not recorded, a space before every token but the first (the tokens joined with spaces)."""
        spans, tokens = self._spans(text), self.tokens[text]
        if spans is None:
            return tuple(t if i == 0 else " " + t for i, t in enumerate(tokens))
        return text_pieces(tokens, self.texts[text], spans)

    def context(self, example: TopExample, width: int = CONTEXT, between: int = BETWEEN
                ) -> tuple[tuple[str, ...], int, int]:
        """The pieces (`pieces`) around an example's query and key, and where the query and the key are in them:
        `width` before the first of the two and after the last, the pieces between whole up to `between` of them,
        else the first and the last two around an ellipsis (" …"). Joined with "" they read as the text, and
        the query is always among them, near the start: a table cell shows it."""
        pieces = self.pieces(example.text_index)
        lo, hi = min(example.query, example.key), max(example.query, example.key)
        start, stop = max(0, lo - width), min(len(pieces), hi + width + 1)
        start, stop = _word_start(pieces, start), _word_end(pieces, stop)  # "thunder", not "under"
        if hi - lo - 1 > between:  # far apart: the two ends, joined by an ellipsis
            left = pieces[start:_word_end(pieces, lo + 2)]
            right_start = _word_start(pieces, hi - 2)
            right = pieces[right_start:stop]
            shown = (*left, " …", *right)
            at = {lo: lo - start, hi: len(left) + 1 + hi - right_start}
        else:
            shown = pieces[start:stop]
            at = {lo: lo - start, hi: hi - start}
        return shown, at[example.query], at[example.key]

    def save(self, path: str | Path) -> None:
        """Write the survey to one .safetensors file (module docstring)."""
        Path(path).write_bytes(survey_bytes(self))


WORD_PIECES = 6  # pieces a context may grow by at each end to show its first and last word whole


def _word_start(pieces, start: int) -> int:
    """`start` moved back to the first piece of the word it is in (a piece that begins with a space, or the
    text's first), by WORD_PIECES at most."""
    for _ in range(WORD_PIECES):
        if start == 0 or pieces[start][:1].isspace() or not pieces[start - 1].strip():
            break
        start -= 1
    return start


def _word_end(pieces, stop: int) -> int:
    """`stop` moved on past the last piece of the word the context ends in, by WORD_PIECES at most."""
    for _ in range(WORD_PIECES):
        if stop >= len(pieces) or pieces[stop][:1].isspace() or not pieces[stop].strip():
            break
        stop += 1
    return stop


def corpus_survey(loaded: LoadedModel, texts, *, k: int = TOP_K, include_sinks: bool = False,
                  sample: int = SAMPLE_POINTS, max_tokens: int = MAX_TOKENS, seed: int = 0, first: int = 0,
                  progress: Callable[[float, str], None] | None = None) -> CorpusSurvey:
    """Survey every head over `texts` (a sequence of strings, or a Corpus); `progress(fraction, message)` after
    each text. `first`: the index of texts[0] in a larger corpus this is a part of (its examples and sample
    name texts from there on; merge_surveys joins the parts). ValueError for an encoder-decoder model (its
    decoder reads no text of the corpus)."""
    texts = tuple(getattr(texts, "texts", texts))
    if not texts:
        raise ValueError("the corpus holds no text")
    require(loaded, "corpus survey")
    pass_ = CorpusPass(k=k, include_sinks=include_sinks, sample=sample, seed=seed, statistics=STATISTICS)
    tokens, spans, truncated = [], [], 0
    offsets = {"return_offsets_mapping": True} if getattr(loaded.tokenizer, "is_fast", False) else {}
    for i, text in enumerate(texts, start=first):
        encoded = loaded.tokenizer(text, truncation=True, max_length=max_tokens, **offsets)
        ids = encoded["input_ids"]
        if len(ids) >= max_tokens and len(loaded.tokenizer(text)["input_ids"]) > max_tokens:
            truncated += 1
        att = attend(loaded, text, ids=np.asarray(ids))
        pass_.add(i, att)
        tokens.append(tuple(display_tokens(loaded.tokenizer, att.token_ids)[0]))
        spans.append(np.asarray(encoded["offset_mapping"], np.int32).reshape(-1, 2) if offsets else None)
        if progress:
            progress((i + 1 - first) / len(texts), f"Surveyed {i + 1 - first:,} of {len(texts):,} texts")
    return CorpusSurvey(**pass_.finish(), model_name=loaded.spec.name, texts=texts, tokens=tuple(tokens),
                        truncated=truncated, max_tokens=max_tokens, spans=np.concatenate(spans) if offsets else None)


# --- One file --------------------------------------------------------------------------------------------
_ARRAYS = ("top_text", "top_query", "top_key", "top_weight", "sample_text", "sample_position", "sample_priority",
           "q_sample", "k_sample", "spans")  # the first seven always, the others where recorded
_HEADER = ("model_name", "texts", "tokens", "truncated", "max_tokens", "include_sinks")


def survey_bytes(found: CorpusSurvey) -> bytes:
    """The survey as .safetensors bytes: arrays, and the JSON header under the metadata key "corpus_survey"."""
    from safetensors.numpy import save

    arrays = {name: np.ascontiguousarray(getattr(found, name)) for name in _ARRAYS if getattr(found, name) is not None}
    arrays.update({f"statistic.{name}": np.ascontiguousarray(v) for name, v in found.statistics.items()})
    header = {name: getattr(found, name) for name in _HEADER} | {"format": FORMAT}
    return save(arrays, metadata={"corpus_survey": json.dumps(header)})


def load_corpus_survey(source: str | Path | bytes, *, first: int = 0) -> CorpusSurvey:
    """A survey saved by CorpusSurvey.save, from a path or the file's bytes; ValueError, in words for the user,
    for a file that is not one (another format, a truncated file, missing arrays, parts that do not fit
    together). Never unpickles. `first`: for a part of a larger corpus (corpus_survey's `first`), the number
    its first text has there: its examples name texts first...first + T - 1."""
    header, arrays = read_saved(source, "corpus_survey", "a saved corpus survey")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError("this .safetensors file holds no corpus survey (its metadata has no \"corpus_survey\" "
                         f"header of format “{FORMAT}”)")
    missing = [n for n in (*_ARRAYS[:7], *(f"statistic.{s}" for s in STATISTICS)) if n not in arrays]
    if missing or any(name not in header for name in _HEADER):
        raise ValueError(f"the saved survey is incomplete (missing: {', '.join(missing) or 'header fields'})")
    try:
        found = CorpusSurvey(
            model_name=str(header["model_name"]), texts=tuple(map(str, header["texts"])),
            tokens=tuple(tuple(map(str, t)) for t in header["tokens"]), truncated=int(header["truncated"]),
            max_tokens=int(header["max_tokens"]), include_sinks=bool(header["include_sinks"]),
            **{name: arrays.get(name) for name in _ARRAYS},
            statistics={name: arrays[f"statistic.{name}"] for name in STATISTICS})
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"the saved survey's header cannot be read: {err}") from None
    problem = _inconsistency(found, first)
    if problem:
        raise ValueError(f"the saved survey does not hold together: {problem}")
    return found


def _inconsistency(found: CorpusSurvey, first: int = 0) -> str | None:
    """What in a survey read from a file does not fit together (None: nothing), so that a page never indexes
    past an array: shapes, and every text, query and key an example or a sample names (texts numbered from
    `first`)."""
    T = len(found.texts)
    top = (found.top_text, found.top_query, found.top_key, found.top_weight)
    if len(found.tokens) != T or T == 0:
        return f"{T} texts but tokens for {len(found.tokens)}"
    if any(a.ndim != 3 or a.shape != top[0].shape for a in top) or 0 in top[0].shape[:2]:
        return "the top examples' arrays differ in shape"
    L, H, _ = top[0].shape
    if any(a.shape != (T, L, H) for a in found.statistics.values()):
        return "a statistic is not one value per text and head"
    if found.sample_text.ndim != 1 or found.sample_position.shape != found.sample_text.shape:
        return "the sample's arrays differ in shape"
    named = found.top_text >= 0
    texts, sampled = found.top_text[named] - first, found.sample_text - first  # from 0 in this file
    if (texts < 0).any() or (texts >= T).any() or (sampled < 0).any() or (sampled >= T).any():
        return "an example or a sample names a text the survey does not have"
    lengths = np.array([len(t) for t in found.tokens])
    for positions in (found.top_query, found.top_key):
        if (positions[named] < 0).any() or (positions[named] >= lengths[texts]).any():
            return "an example names a token past its text's end"
    if (found.sample_position < 0).any() or (found.sample_position >= lengths[sampled]).any():
        return "a sample names a token past its text's end"
    if found.spans is not None:
        spans = found.spans
        if spans.ndim != 2 or spans.shape != (lengths.sum(), 2) or not np.issubdtype(spans.dtype, np.integer):
            return "the tokens' spans are not one (start, end) per token"
        ends = np.repeat([len(t) for t in found.texts], lengths)  # each token's text's length
        if (spans[:, 0] < 0).any() or (spans[:, 1] < spans[:, 0]).any() or (spans[:, 1] > ends).any():
            return "a token's span lies outside its text"
    for sample in (found.q_sample, found.k_sample):
        if sample is not None and (sample.ndim != 4 or sample.shape[2] != found.sample_text.size):
            return "the sampled queries or keys do not match the sample"
        if sample is not None and not np.isfinite(sample).all():  # an infinity made the picture's PCA fail
            return "a sampled query or key is not a finite number"
    return None

