"""What the learner has done, in one place: the pages seen, the answers given, the pages whose questions were
opened without an answer (skipped), and the step of the path opened last.

Every read and write of the learner's progress goes through here (pages/_lessons.py asks the questions,
pages/home.py and the path's links read where the learner stands); it is kept in the browser session
(st.session_state) under the keys below.

    seen("lookup"); was_seen("pages/lookup.py")          # by URL name, by path
    record(key, Answered(choice, reveal)); answer(key)   # a question's answer, once judged
    progress()                                           # (path pages seen, answered, right)
"""

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from pages._site import PATH

ANSWERS = "lessons.answers"  # session key: question key -> Answered
SEEN = "lessons.seen"  # session key: the pages opened, by URL name ("lookup": pages/lookup.py)
SKIPPED = "lessons.skipped"  # session key: the pages whose questions the learner skipped, by URL name
LAST_STEP = "lessons.last_step"  # session key: the page of the path opened last, by its path


@dataclass(frozen=True)
class Answered:
    """A question answered: the learner's choice and, once judged, the answer it was judged against."""

    choice: str
    reveal: object | None = None  # attention.toy.questions.Reveal; None until a model question's page has run

    @property
    def right(self) -> bool | None:
        """Whether the choice is the answer (None until judged)."""
        return None if self.reveal is None else self.choice == self.reveal.answer


def answer(key: str) -> Answered | None:
    """The learner's answer to question `key`, or None."""
    return st.session_state.get(ANSWERS, {}).get(key)


def record(key: str, answered: Answered) -> None:
    """Keep the learner's answer to question `key`."""
    st.session_state.setdefault(ANSWERS, {})[key] = answered


def forget(key: str, page: str | None = None) -> None:
    """A question asked again: its answer forgotten, and (with `page`, by URL name) its page no longer skipped."""
    st.session_state.get(ANSWERS, {}).pop(key, None)
    if page is not None:
        st.session_state.get(SKIPPED, set()).discard(page)


def skip(page: str) -> None:
    """The page `page` (URL name) opened whole before its questions were answered."""
    st.session_state.setdefault(SKIPPED, set()).add(page)


def skipped(page: str) -> bool:
    """Whether the page `page` (URL name) was opened whole before its questions were answered."""
    return page in st.session_state.get(SKIPPED, set())


def seen(name: str) -> None:
    """Note that the learner opened the page `name` (its URL name; app.py calls it for every page)."""
    st.session_state.setdefault(SEEN, set()).add(name)
    step = next((p for p in PATH if Path(p).stem == name), None)
    if step is not None:
        st.session_state[LAST_STEP] = step


def was_seen(path: str) -> bool:
    """Whether the learner opened the page at `path` ("pages/lookup.py")."""
    return Path(path).stem in st.session_state.get(SEEN, set())


def last_step() -> str | None:
    """The page of the path the learner opened last (its path), or None."""
    return st.session_state.get(LAST_STEP)


def next_step() -> str | None:
    """Where the path goes on from: the first page not seen after the step the learner was on last, else the
    first page not seen at all; None once every page was seen (Home's Continue, and "Continue the path" off it)."""
    last = last_step()
    later = PATH[PATH.index(last) + 1:] if last else PATH
    return next((p for p in (*later, *PATH) if not was_seen(p)), None)


def progress() -> tuple[int, int, int]:
    """(path pages seen, questions answered, of them right as far as judged)."""
    answers = st.session_state.get(ANSWERS, {})
    return sum(was_seen(p) for p in PATH), len(answers), sum(1 for a in answers.values() if a.right)
