"""Predict, then see; and the path through the pages (pages/_site.py holds its order).

A question is asked in a small form: the learner picks an answer (arrow keys move between choices) and
commits; the commit sets the page to the question's state (before its widgets draw, so the charts show
it): a toy page's widgets, or for a model question the visit's focus (pages/_focus.py). The answer,
computed by attention/ from that state, appears with its numbers and one sentence on why. A model question
about one subject ("it", not "bank") is asked while the page shows it, and offers to show it otherwise.
Answers and the pages seen are kept in the session only.
"""

import functools
from pathlib import Path

import streamlit as st

from attention.focus import with_visible_spaces
from pages._focus import current, switch_to, update
from pages._site import PATH, entry
from pages._text import md

ANSWERS = "lessons.answers"  # session key: question key -> (the learner's choice, right or not)
SEEN = "lessons.seen"  # session key: the pages opened, by URL name ("lookup": pages/lookup.py)


def predict_then_see(questions, results: dict | None = None) -> None:
    """Ask each question; once committed, show its answer (toy questions solve from their state, model
    questions from the page's `results`)."""
    for q in questions:
        answered = st.session_state.get(ANSWERS, {}).get(q.key)
        with st.container(border=True, key=f"lesson-{q.key.replace('.', '-')}"):
            st.markdown(f"**Predict, then see.** {md(q.ask)}")
            if answered is None and not _asked_here(q):
                st.caption(f"This question is about {md(q.about)}; the page shows something else now.")
                st.button(f"Show {q.about}", key=f"lesson.show.{q.key}", icon=":material/visibility:",
                          on_click=functools.partial(update, **dict(q.subject)))
                continue
            if answered is None:
                with st.form(f"lesson.form.{q.key}", border=False):
                    st.radio("Your prediction", q.choices, index=None, key=f"lesson.choice.{q.key}", horizontal=True,
                             format_func=with_visible_spaces)  # " Paris" is a token: its space shown, ␣Paris
                    st.form_submit_button("Commit, then see", on_click=functools.partial(_commit, q, results))
                continue
            try:
                reveal = q.reveal() if results is None else q.reveal(results)
            except ValueError as err:  # the page was moved away from the question's state
                st.info(f"{md(err)}. Ask again to set the page back to the question.")
                st.button("Ask me again", key=f"lesson.again.{q.key}", on_click=functools.partial(_forget, q.key))
                continue
            choice, _ = answered
            st.session_state[ANSWERS][q.key] = (choice, choice == reveal.answer)  # judged: model questions now
            said, answer = md(with_visible_spaces(choice)), md(with_visible_spaces(reveal.answer))
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
    answers = st.session_state.setdefault(ANSWERS, {})
    answer = q.reveal().answer if results is None else None  # a model question is judged once its page ran
    answers[q.key] = (choice, None if answer is None else choice == answer)
    if hasattr(q, "focus"):  # a model question: the visit's focus
        update(**dict(q.focus))
    else:  # a toy question: the page's own widgets
        for key, value in q.state:
            st.session_state[key] = value


def _asked_here(q) -> bool:
    """A toy question is asked wherever its page is; a model question while the focus shows its subject."""
    return not hasattr(q, "asked_on") or q.asked_on(current())


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
    return sum(was_seen(p) for p in PATH), len(answers), sum(1 for _, right in answers.values() if right)


def path_links(path: str) -> None:
    """Back and Next along the path, at the end of a page (off the path: back to it)."""
    st.divider()
    c1, c2 = st.columns(2)
    if path in PATH:
        i = PATH.index(path)
        before, after = (PATH[i - 1] if i > 0 else "pages/home.py"), (PATH[i + 1] if i + 1 < len(PATH) else None)
    else:
        before = "pages/home.py"
        after = next((p for p in PATH if not was_seen(p)), PATH[0])
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
