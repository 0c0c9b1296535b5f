"""The answer key of the predict-then-see questions: what a teacher hands out, with or without the answers.

Every answer is computed as its page computes it, never written here: a toy question's at its own state
(attention.toy.questions), a model question's from the model run on the question's own example, the results
its page hands its questions (attention.models.recorded.questions). Beside each choice that is not the answer
stands what choosing it says the student believes (the questions' `misconceptions`). Imports no Streamlit,
and torch only when a model question is asked for.

    >>> entries = answer_key(["lookup", "scaling"], with_models=False)
    >>> print(key_markdown(entries, answers=True, titles={"lookup": "Lookup: hard vs soft"}))
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from attention.focus import Focus, ModelChoice, with_visible_spaces
from attention.toy import questions as toy
from attention.toy.reveal import Reveal


@dataclass(frozen=True)
class KeyEntry:
    """One question of the key: as its page asks it, its computed answer, and the belief behind each other choice."""

    page: str  # the page's file stem, "lookup"
    key: str  # the question's own key, "lookup.winner"
    ask: str
    choices: tuple[str, ...]
    answer: str  # one of `choices`, computed
    said: str  # the answer as a phrase: "chair wins"
    numbers: str  # the figures that decide it, in words
    why: str  # one sentence on why
    misconceptions: tuple[tuple[str, str], ...]  # (choice, what choosing it says the student believes), for each
    # choice but the answer, in the order of `choices`


def answer_key(pages: Sequence[str] | None = None, *, with_models: bool = True,
               load: Callable[[ModelChoice], object] | None = None) -> tuple[KeyEntry, ...]:
    """The key of `pages` (file stems, in the order given; None: every page that asks, the toy pages first), each
    page's questions in the order it asks them. A page that asks nothing adds nothing. `with_models`: also the
    model pages' questions, solved by running the bundled models (seconds; imports torch); without it those
    pages add nothing. `load(ModelChoice) -> LoadedModel`: how a model is loaded (a page passes its cached
    loader, a test its session's models); by default each one once per process, then kept."""
    if isinstance(pages, str):
        raise TypeError(f"pages is a sequence of file stems: [{pages!r}], not {pages!r}")
    toy_pages = tuple(dict.fromkeys(q.page for q in toy.QUESTIONS))
    wants_models = with_models and (pages is None or any(p not in toy_pages for p in pages))
    model_questions = _model_questions() if wants_models else ()
    if pages is None:
        pages = toy_pages + tuple(dict.fromkeys(q.page for q in model_questions))
    solved = _ModelAnswers(load or _loaded)
    entries = []
    for page in pages:
        entries += [_entry(q, q.reveal()) for q in toy.questions_for(page)]
        entries += [_entry(q, solved.reveal(q)) for q in model_questions if q.page == page]
    return tuple(entries)


def key_markdown(entries: Sequence[KeyEntry], *, answers: bool, titles: Mapping[str, str] | None = None) -> str:
    """The key as a printable Markdown handout: a heading for each page (its title in `titles`, else its stem), its
    questions numbered on from the page before (a number names one question in both handouts), each with its
    choices as a list; with `answers`, under each its answer, the figures that decide it, why, and what each
    other choice says the student believes."""
    titles = titles or {}
    lines = [f"# Predict, then see: {'answer key' if answers else 'questions'}"]
    if not answers:  # a sheet a student fills in
        lines += ["", "Name: " + r"\_" * 30]
    page = None
    for n, e in enumerate(entries, 1):
        if e.page != page:
            page = e.page
            lines += ["", f"## {titles.get(page, page)}"]
        pad = " " * (len(str(n)) + 2)  # under the text of "n. ": what follows stays inside the item
        lines += ["", f"{n}. {e.ask}", *(f"{pad}- {shown_choice(c)}" for c in e.choices)]
        if not answers:
            lines += ["", f"{pad}My prediction: " + r"\_" * 20 + "  Why: " + r"\_" * 30]
        if answers:
            lines += ["", f"{pad}{_answer_line(e)}", "", f"{pad}{_sentence(e.numbers)}", "",
                      f"{pad}Why: {_ended(e.why)}", ""]
            lines += [f"{pad}- If they chose {shown_choice(c)}: {_ended(belief)}" for c, belief in e.misconceptions]
    return "\n".join(lines) + "\n"


def shown_choice(choice: str) -> str:
    """A choice as the questions' radio shows it (pages/_lessons.shown_choice): a token's leading or trailing space
    as ␣ (" Paris" is ␣Paris), words as they are ("it grows")."""
    return with_visible_spaces(choice) if choice != choice.strip() else choice


def _answer_line(e: KeyEntry) -> str:
    """"**Answer:** chair — chair wins.", or "**Answer:** it approaches 1." where the phrase is the choice."""
    shown = shown_choice(e.answer)
    return f"**Answer:** {_ended(shown)}" if e.said == e.answer else f"**Answer:** {shown} — {_ended(e.said)}"


def _ended(text: str) -> str:
    """A phrase with a full stop (a Reveal's parts and the beliefs are written as phrases)."""
    text = text.strip()
    return text + ("" if text.endswith(".") else ".")


def _sentence(text: str) -> str:
    """A phrase as a sentence: a capital first letter and a full stop, as the pages say a Reveal's figures."""
    text = _ended(text)
    return text[:1].upper() + text[1:]


def _entry(q, reveal: Reveal) -> KeyEntry:
    """A question (toy or model: both have key, page, ask, choices, misconception) and its computed answer."""
    return KeyEntry(page=q.page, key=q.key, ask=q.ask, choices=q.choices, answer=reveal.answer, said=reveal.said,
                    numbers=reveal.numbers, why=reveal.why,
                    misconceptions=tuple((c, q.misconception(c)) for c in q.choices if c != reveal.answer))


# --- Model questions: what each model page hands its questions, computed as the page computes it ------------
def _model_questions() -> tuple:
    """Every model page's questions (imports the model side, and torch)."""
    from attention.models import model_questions_for

    return model_questions_for()


@functools.cache
def _loaded(choice: ModelChoice):
    """A model as the app loads it (pages/_jobs.cached_model), once per process."""
    from attention.models import load_model

    return load_model(choice.name, dtype=choice.dtype)


def _one_text(focus: Focus, loaded) -> dict:
    """Model heads, Inside one head: the model's result on the focus's text."""
    from attention.models import attend

    return {"att": attend(loaded, focus.text)}


def _pair(focus: Focus, loaded) -> dict:
    """Ambiguous words: the results on the pair's two sentences."""
    from attention.models import attend

    return {"a": attend(loaded, focus.pair.a), "b": attend(loaded, focus.pair.b)}


def _prediction(focus: Focus, loaded) -> dict:
    """Predictions: the result on the prompt and the tokenizer that decodes its next token."""
    from attention.models import attend

    return {"att": attend(loaded, focus.text), "tokenizer": loaded.tokenizer}


def _shares(focus: Focus, loaded) -> dict:
    """What heads do: each part's direct share of m = logit(target) − logit(foil), for the target and foil the page
    reads at this focus (attention.models.contrast_words: the example's own, where nothing was picked)."""
    from attention.models import attend, contrast, contrast_words, direct_logit_attribution

    att = attend(loaded, focus.text)
    words = contrast_words(focus, att, loaded.tokenizer)
    made = contrast(att, loaded.tokenizer, words.target, words.foil)
    return {"shares": direct_logit_attribution(loaded, att, made)}


RESULTS: dict[str, Callable[[Focus, object], dict]] = {  # a model page's stem -> the results it hands its questions
    "model_heads": _one_text, "inside_head": _one_text, "ambiguous_words": _pair, "predictions": _prediction,
    "what_heads_do": _shares,
}


class _ModelAnswers:
    """Model questions solved from their pages' results, each result computed once per key (two questions on one
    example share it)."""

    def __init__(self, load: Callable[[ModelChoice], object]):
        self.load = load
        self.results: dict[tuple, dict] = {}

    def reveal(self, q) -> Reveal:
        if q.page not in RESULTS:
            raise ValueError(f"{q.key}: no way to compute what the page {q.page!r} hands its questions; add one to "
                             "attention.answer_key.RESULTS")
        focus = Focus(**dict(q.focus))
        made = (q.page, focus.model, focus.text, focus.pair)
        if made not in self.results:
            self.results[made] = RESULTS[q.page](focus, self.load(focus.model))
        return q.reveal(self.results[made])
