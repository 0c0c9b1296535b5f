"""Explain, ask, then show; and the path through the pages (pages/_site.py holds its order).

A page of the path opens with `intro`: where it stands on the path and two or three sentences on what and
why, each term a student may not know explained on hover (attention.glossary). Then its questions, one at
a time: the learner picks an answer (arrow keys move between choices) and commits; the answer appears as a
sentence, with the figures that decide it as bars and one sentence on why, computed by attention/ from the
question's own state. Answering never moves the page's widgets: each question keeps its own state, and a
button sets the page to it once the page is open. On a toy page what follows the questions would give the
answers away, so it waits until they are answered (or skipped: `questions_first`). A model question sets
the visit's focus to its own example when committed, and is judged from the page's result there.
Answers and the pages seen are kept in the session only.
"""

import functools
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from attention.figures import reveal_bars
from attention.focus import with_visible_spaces
from pages._focus import current, put, switch_to, update
from pages._site import PATH, entry
from pages._text import explained, md

ANSWERS = "lessons.answers"  # session key: question key -> Answered
SEEN = "lessons.seen"  # session key: the pages opened, by URL name ("lookup": pages/lookup.py)
SKIPPED = "lessons.skipped"  # session key: the pages whose questions the learner skipped, by URL name
EXPLAINED = "lessons.explained"  # session key: the glossary terms already explained on this run of the page
ARRIVED = "lessons.arrived"  # session key: the page the path's Next (or Home's Start) is opening
LAST_STEP = "lessons.last_step"  # session key: the page of the path opened last, by its path
BEFORE = "lessons.before"  # session key: question key -> the focus a model question's commit replaced


@dataclass(frozen=True)
class Answered:
    """A question answered: the learner's choice and, once judged, the answer it was judged against."""

    choice: str
    reveal: object | None = None  # attention.toy.lessons.Reveal; None until a model question's page has run

    @property
    def right(self) -> bool | None:
        return None if self.reveal is None else self.choice == self.reveal.answer


def intro(path: str, what: str) -> None:
    """The top of a page: its step on the path ("Step 3 of 11") and what it shows and why, each glossary
    term explained on hover where it first appears (later prose on the page goes through `prose`)."""
    st.session_state[EXPLAINED] = set()
    if path in PATH:
        st.caption(f"Step {PATH.index(path) + 1} of {len(PATH)} of the learner's path · about "
                   f"{entry(path).minutes} min")
    prose(what)


def prose(text: str, container=None) -> None:
    """Our own markdown, each glossary term not yet explained on this page marked with its definition."""
    (container or st).markdown(explained(text, st.session_state.setdefault(EXPLAINED, set())),
                               unsafe_allow_html=True)


def verdict(choice: str, reveal) -> str:
    """The verdict as a sentence: "Right: it grows." or "You said “shrinks”; it grows." (markdown)."""
    said = md(reveal.said)
    if choice == reveal.answer:
        return f"Right: {said}."
    return f"You said “{md(shown_choice(choice))}”; {said}."


def predict_then_see(questions, results: dict | None = None) -> bool:
    """Ask the questions in order, each once the one before is answered; an answered one shows its verdict,
    numbers, bars and why. Toy questions solve from their own state; model questions from the page's
    `results`. Returns whether every question is answered."""
    answers = st.session_state.get(ANSWERS, {})
    n = len(questions)
    for i, q in enumerate(questions):
        answered = answers.get(q.key)
        with st.container(border=True, key=f"lesson-{q.key.replace('.', '-')}"):
            st.markdown(f"**Question {i + 1} of {n} · predict, then see.** {md(q.ask)}")
            if answered is None:
                _ask(q, results)
                return False
            if answered.reveal is None:  # a model question, on the run after its commit: judged from this page
                try:
                    answered = _judged(q, answered.choice, q.reveal(results))
                except ValueError as err:  # the page could not show the question's state
                    st.info(f"{md(err)}. Ask again to set the page back to the question.")
                    st.button("Ask me again", key=f"lesson.again.{q.key}", on_click=functools.partial(_forget, q.key))
                    return False
            _show(q, answered)
    return True


def questions_first(questions, path: str) -> None:
    """A toy page's questions; until they are answered (or skipped), the rest of the page, which would give
    their answers away, waits: the page ends here with a button that opens it anyway."""
    skipped = Path(path).stem in st.session_state.get(SKIPPED, set())
    if predict_then_see(questions) or skipped or _a_view_link(questions):
        return
    st.caption("The rest of this page shows the answer: commit a prediction first, or open it without one.")
    st.button("Show the rest of the page", key="lesson.skip", icon=":material/visibility:",
              on_click=functools.partial(_skip, Path(path).stem))
    path_links(path)
    st.stop()


def _a_view_link(questions) -> bool:
    """Whether the page was opened from a link that sets its own controls (its widgets' keys start as its
    questions' do, "lookup."): a link names a view, and opens it whole."""
    prefixes = {q.key.split(".")[0] + "." for q in questions}
    return any(name.startswith(tuple(prefixes)) for name in st.query_params)


def _ask(q, results) -> None:
    with st.form(f"lesson.form.{q.key}", border=False):
        st.radio("Your prediction", q.choices, index=None, key=f"lesson.choice.{q.key}", horizontal=True,
                 format_func=shown_choice)
        if hasattr(q, "focus"):
            st.caption(f"Committing shows {md(q.about)} on this page.")
        st.form_submit_button("Commit, then see", on_click=functools.partial(_commit, q, results))


def _show(q, answered: Answered) -> None:
    """An answer as it was judged, on the question's own example: a page moved on since (another sentence,
    another model) does not judge it again."""
    reveal = answered.reveal
    (st.success if answered.right else st.info)(f"{verdict(answered.choice, reveal)} "
                                                f"{md(_sentence(reveal.numbers))} {md(_sentence(reveal.why))}")
    if reveal.bars:
        st.plotly_chart(reveal_bars(reveal), key=f"lesson.bars.{q.key}", config={"displayModeBar": False})
    row = st.container(horizontal=True)  # buttons side by side, wrapping when narrow (columns cut their labels)
    row.button("Ask me again", key=f"lesson.again.{q.key}", on_click=functools.partial(_forget, q.key, q.page))
    row.button("Show this on the page", key=f"lesson.state.{q.key}", icon=":material/tune:",
               on_click=functools.partial(_set_state, q))
    before = st.session_state.get(BEFORE, {}).get(q.key)
    if before is not None and before != current():  # committing put the question's example in its place
        row.button("Back to your text", key=f"lesson.back.{q.key}", icon=":material/undo:",
                   help="The sentence, model and view you had before committing.",
                   on_click=functools.partial(_back_to, q.key))


def _sentence(text: str) -> str:
    """A capital first letter and a full stop (Reveal's parts are written as phrases)."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _commit(q, results) -> None:
    choice = st.session_state.get(f"lesson.choice.{q.key}")
    if choice is None:
        st.toast("Pick an answer first.")
        return
    if results is None:  # a toy question: judged from its own state now; the page's widgets stay as they are
        _judged(q, choice, q.reveal())
    else:  # a model question: judged once the page has run on its example (predict_then_see)
        st.session_state.setdefault(ANSWERS, {})[q.key] = Answered(choice)
        before = current()
        if before != before.replace(**dict(q.focus)):  # the learner's own sentence or model: kept to go back to
            st.session_state.setdefault(BEFORE, {})[q.key] = before
        update(**dict(q.focus))


def _set_state(q) -> None:
    """The page set to a question's own state: a model question's focus, or a toy page's widgets."""
    if hasattr(q, "focus"):
        update(**dict(q.focus))
        return
    for key, value in q.state:
        st.session_state[key] = value
    st.session_state.setdefault(SKIPPED, set()).add(q.page)  # the page is open: the state is drawn


def _judged(q, choice, reveal) -> Answered:
    answered = Answered(choice, reveal)
    st.session_state.setdefault(ANSWERS, {})[q.key] = answered
    return answered


def shown_choice(choice: str) -> str:
    """A choice as the radio and the verdict show it: a token's leading or trailing space as ␣ (" Paris" is
    ␣Paris), words as they are ("it grows")."""
    return with_visible_spaces(choice) if choice != choice.strip() else choice


def _back_to(key: str) -> None:
    """The focus a model question's commit replaced, back (the question stays answered)."""
    before = st.session_state.get(BEFORE, {}).pop(key, None)
    if before is not None:
        put(before)


def _forget(key: str, page: str | None = None) -> None:
    """A question asked again: its answer forgotten, and its page held again until it is answered (the page
    may have been opened to show a question's state)."""
    st.session_state.get(ANSWERS, {}).pop(key, None)
    if page is not None:
        st.session_state.get(SKIPPED, set()).discard(page)


def _skip(page: str) -> None:
    st.session_state.setdefault(SKIPPED, set()).add(page)


def seen(name: str) -> None:
    """Note that the learner opened the page `name` (its URL name; app.py calls it for every page)."""
    st.session_state.setdefault(SEEN, set()).add(name)
    step = next((p for p in PATH if Path(p).stem == name), None)
    if step is not None:
        st.session_state[LAST_STEP] = step


def next_step() -> str | None:
    """Where the path goes on from: the first page not seen after the step the learner was on last, else the
    first page not seen at all; None once every page was seen (Home's Continue, and "Continue the path" off it)."""
    last = st.session_state.get(LAST_STEP)
    later = PATH[PATH.index(last) + 1:] if last else PATH
    return next((p for p in (*later, *PATH) if not was_seen(p)), None)


def was_seen(path: str) -> bool:
    return Path(path).stem in st.session_state.get(SEEN, set())


def progress() -> tuple[int, int, int]:
    """(path pages seen, questions answered, of them right as far as judged)."""
    answers = st.session_state.get(ANSWERS, {})
    return sum(was_seen(p) for p in PATH), len(answers), sum(1 for a in answers.values() if a.right)


def path_links(path: str) -> None:
    """Back and Next along the path, at the end of a page; the last page closes the path with what the learner
    has seen and where to go next. Off the path, Back returns to the step the learner was on and "Continue the
    path" goes on from there (a step-7 learner who opened Head atlas is not sent to step 1). Each button on a
    row of its own: side by side, "Next: Step by step: self-attention" was cut at 800 px."""
    st.divider()
    if path in PATH:
        i = PATH.index(path)
        before, after = (PATH[i - 1] if i > 0 else "pages/home.py"), (PATH[i + 1] if i + 1 < len(PATH) else None)
    else:
        before, after = st.session_state.get(LAST_STEP) or "pages/home.py", next_step()
    if after is None and path in PATH:
        _the_end()
    if after is not None:
        nxt = entry(after)
        label = f"Next: {nxt.title}" if path in PATH else f"Continue the path: {nxt.title}"
        if st.button(label, icon=":material/arrow_forward:", key="path.next", type="primary"):
            go_on(after)
    elif path not in PATH:
        st.caption("You have seen every page of the path.")
    back = entry(before)
    if st.button(f"Back: {back.title}", icon=":material/arrow_back:", key="path.back"):
        switch_to(before)


def go_on(page: str) -> None:
    """The path's next step: `page` opened, and told it was opened from the path (`arrived_by_path`)."""
    st.session_state[ARRIVED] = page
    switch_to(page)


def arrived_by_path(page: str) -> bool:
    """Whether `page` was just opened by the path's Next or Home's Start (asked once a visit to it: a page
    that reads a prediction then opens on a model that predicts, pages/_examples.py)."""
    return st.session_state.pop(ARRIVED, None) == page


def _the_end() -> None:
    """The last page of the path: what the learner has seen, and where to go next."""
    pages_seen, answered, right = progress()
    with st.container(border=True, key="path-end"):
        st.markdown("**The end of the path.** You have followed attention from a lookup in a table to the "
                    "heads of two real models:")
        prose("  \n".join(f"{'✓' if was_seen(p) else '○'} **{md(entry(p).title)}**: {entry(p).line}" for p in PATH))
        st.markdown(f"{pages_seen} of {len(PATH)} pages seen; {answered} questions answered, {right} right.")
        st.markdown("**Where to go next.** Type your own sentence on Model heads and follow a head you find "
                    "into Inside one head; see what every head does across many texts on A head across a "
                    "corpus; or read the pages off the path:")
        for p in ("pages/head_atlas.py", "pages/corpus.py", "pages/scoring.py", "pages/toy_ambiguity.py"):
            st.page_link(p, label=entry(p).title, icon=entry(p).icon)


def for_developers(text: str) -> None:
    """Where the page's numbers come from, for a reader of the code: the only place a page's prose names
    modules, functions or the seed texts."""
    with st.expander("For developers", icon=":material/code:"):
        st.markdown(text)
