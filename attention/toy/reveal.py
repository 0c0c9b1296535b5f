"""What a question of a page is (Question), what its answer shows (Reveal), and the one belief each choice
stands for (its misconceptions): shared by the toy pages' questions (attention.toy.questions) and the model
pages' (attention.models.recorded.questions)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from attention.toy.rounding import number, percent


@dataclass(frozen=True)
class Reveal:
    """The answer, as a choice and as a sentence, the figures that decide it and why."""

    answer: str  # one of the question's choices
    said: str  # the answer as a phrase a verdict ends with: "it grows" ("You said “shrinks”; it grows.")
    numbers: str  # the figures that decide it, in words
    why: str  # one sentence on why
    bars: tuple[tuple[str, float], ...] = ()  # the same figures, one bar each: (label, value)
    measure: str = ""  # what the bars measure: the chart's title
    percent: bool = False  # the figures are shares said as percents ("98.5%"), not numbers ("0.296")

    def shown(self, value: float) -> str:
        """A figure as the sentence says it and its bar is labelled: one rounding rule (attention.toy.rounding)."""
        return percent(value) if self.percent else number(value)


@dataclass(frozen=True)
class Question:
    key: str  # unique, "lookup.winner"
    page: str  # the page's file stem, "lookup"
    ask: str
    choices: tuple[str, ...]
    state: tuple[tuple[str, object], ...]  # (widget key, value) pairs the page is set to when the answer shows
    solve: Callable[[dict], Reveal]  # the answer from the state, computed
    misconceptions: tuple[tuple[str, str], ...] = ()  # (choice, what choosing it says the student believes): one
    # per choice, the answer's too, since the answer is computed; a sentence a teacher can read aloud

    def reveal(self) -> Reveal:
        """The answer, solved at the question's own state."""
        return self.solve(dict(self.state))

    def misconception(self, choice: str) -> str:
        """What choosing `choice` says the student believes (ValueError for a choice it has none for)."""
        return misconception_in(self.key, self.misconceptions, choice)


def misconception_in(key: str, misconceptions: tuple[tuple[str, str], ...], choice: str) -> str:
    """The one belief `misconceptions` holds for `choice`, of the question `key` (named in the ValueError)."""
    found = [text for c, text in misconceptions if c == choice]
    if len(found) != 1:
        raise ValueError(f"{key}: {len(found)} misconceptions for the choice {choice!r}, not 1")
    return found[0]


def check_misconceptions_of(key: str, choices: tuple[str, ...], misconceptions: tuple[tuple[str, str], ...]) -> None:
    """Exactly one belief, not empty, for each choice of the question `key`, and none for a choice it does not
    offer (ValueError naming the first that is not so); model questions are checked with it too."""
    stray = [c for c, _ in misconceptions if c not in choices]
    if stray:
        raise ValueError(f"{key}: misconceptions for {stray}, which are not among its choices {choices}")
    for choice in choices:
        if not misconception_in(key, misconceptions, choice).strip():
            raise ValueError(f"{key}: the misconception for the choice {choice!r} is empty")


def weights_in_words(labels, weights) -> str:
    """"apple 0.296, banana 0.296": each weight as its bar says it (attention.toy.rounding.number)."""
    return ", ".join(f"{label} {number(w)}" for label, w in zip(labels, weights, strict=True))


def bars(labels, values) -> tuple[tuple[str, float], ...]:
    """(label, value) pairs, one bar each, for Reveal.bars."""
    return tuple((str(label), float(v)) for label, v in zip(labels, values, strict=True))
