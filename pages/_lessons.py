"""Predict, then see; and the path through the pages (pages/_site.py holds its order).

A question is asked in a small form: the learner picks an answer (arrow keys move between choices) and
commits; the commit sets the page to the question's state (before its widgets draw, so the charts show
it): a toy page's widgets, or for a model question the visit's focus (pages/_focus.py). The answer,
computed by attention/ from that state, appears with its numbers and one sentence on why. A model question
about one subject ("it", not "bank") is asked while the page shows it, and offers to show it otherwise.
Answers and the pages seen are kept in the session only.
"""

import functools
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from attention.focus import with_visible_spaces
from pages._focus import current, switch_to, update
from pages._site import PATH, entry
from pages._text import md

ANSWERS = "lessons.answers"  # session key: question key -> Answered
SEEN = "lessons.seen"  # session key: the pages opened, by URL name ("lookup": pages/lookup.py)


@dataclass(frozen=True)
class Answered:
    """A question answered: the learner's choice and, once judged, the answer it was judged against."""

    choice: str
    reveal: object | None = None  # attention.toy.lessons.Reveal; None until a model question's page has run

    @property
    def right(self) -> bool | None:
        return None if self.reveal is None else self.choice == self.reveal.answer


def predict_then_see(questions, results: dict | None = None, showing=None) -> None:
    """Ask each question; once committed, show its answer (toy questions solve from their state, model
    questions from the page's `results`). `showing`: the focus as the page shows it (its default model
    filled in), for the questions about one subject."""
    for q in questions:
        answered = st.session_state.get(ANSWERS, {}).get(q.key)
        with st.container(border=True, key=f"lesson-{q.key.replace('.', '-')}"):
            st.markdown(f"**Predict, then see.** {md(q.ask)}")
            if answered is None and not _asked_here(q, showing):
                st.caption(f"This question is about {md(q.about)}; the page shows something else now.")
                st.button(f"Show {q.about}", key=f"lesson.show.{q.key}", icon=":material/visibility:",
                          on_click=functools.partial(update, **dict(q.subject)))
                continue
            if answered is None:
                with st.form(f"lesson.form.{q.key}", border=False):
                    st.radio("Your prediction", q.choices, index=None, key=f"lesson.choice.{q.key}", horizontal=True,
                             format_func=shown_choice)
                    st.form_submit_button("Commit, then see", on_click=functools.partial(_commit, q, results))
                continue
            if answered.reveal is None:  # a model question, on the run after its commit: judged from this page
                try:
                    answered = _judged(q, answered.choice, q.reveal(results))
                except ValueError as err:  # the page could not show the question's state
                    st.info(f"{md(err)}. Ask again to set the page back to the question.")
                    st.button("Ask me again", key=f"lesson.again.{q.key}", on_click=functools.partial(_forget, q.key))
                    continue
            # The answer stays as it was judged, on the question's own example: a page moved on since (another
            # sentence, another model) does not judge it again.
            choice, reveal = answered.choice, answered.reveal
            said, answer = md(shown_choice(choice)), md(shown_choice(reveal.answer))
            verdict = f"Right: **{answer}**." if choice == reveal.answer else f"You said {said}; it is **{answer}**."
            (st.success if choice == reveal.answer else st.info)(f"{verdict} {md(_sentence(reveal.numbers))} "
                                                                   f"{md(_sentence(reveal.why))}")
            st.button("Ask me again", key=f"lesson.again.{q.key}", on_click=functools.partial(_forget, q.key))


def _sentence(text: str) -> str:
    """A capital first letter and a full stop (Reveal's parts are written as phrases)."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _commit(q, results) -> None:
    choice = st.session_state.get(f"lesson.choice.{q.key}")
    if choice is None:
        st.toast("Pick an answer first.")
        return
    if results is None:  # a toy question: judged from its own state now
        _judged(q, choice, q.reveal())
    else:  # a model question: judged once the page has run in its state (predict_then_see)
        st.session_state.setdefault(ANSWERS, {})[q.key] = Answered(choice)
    if hasattr(q, "focus"):  # a model question: the visit's focus
        update(**dict(q.focus))
    else:  # a toy question: the page's own widgets
        for key, value in q.state:
            st.session_state[key] = value


def _judged(q, choice, reveal) -> Answered:
    answered = Answered(choice, reveal)
    st.session_state.setdefault(ANSWERS, {})[q.key] = answered
    return answered


def shown_choice(choice: str) -> str:
    """A choice as the radio and the verdict show it: a token's leading or trailing space as ␣ (" Paris" is
    ␣Paris), words as they are ("it grows")."""
    return with_visible_spaces(choice) if choice != choice.strip() else choice


def _asked_here(q, showing) -> bool:
    """A toy question is asked wherever its page is; a model question while the page shows its subject."""
    return not hasattr(q, "asked_on") or q.asked_on(current() if showing is None else showing)


def _forget(key: str) -> None:
    st.session_state.get(ANSWERS, {}).pop(key, None)


def seen(name: str) -> None:
    """Note that the learner opened the page `name` (its URL name; app.py calls it for every page)."""
    st.session_state.setdefault(SEEN, set()).add(name)


def was_seen(path: str) -> bool:
    return Path(path).stem in st.session_state.get(SEEN, set())


def progress() -> tuple[int, int, int]:
    """(path pages seen, questions answered, of them right as far as judged)."""
    answers = st.session_state.get(ANSWERS, {})
    return sum(was_seen(p) for p in PATH), len(answers), sum(1 for a in answers.values() if a.right)


def path_links(path: str) -> None:
    """Back and Next along the path, at the end of a page (off the path: back to it)."""
    st.divider()
    c1, c2 = st.columns(2)
    if path in PATH:
        i = PATH.index(path)
        before, after = (PATH[i - 1] if i > 0 else "pages/home.py"), (PATH[i + 1] if i + 1 < len(PATH) else None)
    else:
        before = "pages/home.py"
        after = next((p for p in PATH if not was_seen(p)), None)
    back = entry(before)
    if c1.button(f"Back: {back.title}", icon=":material/arrow_back:", key="path.back"):
        switch_to(before)
    if after is not None:
        nxt = entry(after)
        label = f"Next: {nxt.title}" if path in PATH else f"Continue the path: {nxt.title}"
        if c2.button(label, icon=":material/arrow_forward:", key="path.next", type="primary"):
            switch_to(after)
    elif path in PATH:
        c2.success("The end of the path. The pages off it (Scoring functions, Ambiguity in a toy model, Head "
                   "atlas) are in the sidebar.")
    else:
        c2.caption("You have seen every page of the path.")
