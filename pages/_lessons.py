"""Ask, then show: a page's predict-then-see questions.

A page of the path opens with `intro` (pages/_path.py); then its questions, one at a time: the learner picks
an answer (arrow keys move between choices) and commits; the answer appears as a sentence, with the figures
that decide it as bars and one sentence on why, computed by attention/ from the question's own state.
Answering never moves the page's widgets: each question keeps its own state, and a button sets the page to it
once the page is open. On a toy page what follows the questions would give the answers away, so it waits until
they are answered (or skipped: `questions_first`). A model question is judged on its own example: from the page's
result when the page shows it, else from the page's `example(focus)`, run beside the reader's own sentence, which
stays on the page ("Show this on the page" moves the page there, "Back to your text" back: a first-year's own
sentences were replaced by a question's, issue 68). What the learner has done (answers, pages seen) is kept by
pages/_learner.py.
"""

import functools
from pathlib import Path

import streamlit as st

from attention.figures import reveal_bars
from attention.focus import with_visible_spaces
from attention.glossary import definition
from pages._focus import current, put, update
from pages._learner import Answered, answer, current_class, forget, page_revealed, record, skip, skipped
from pages._path import UNANSWERED, path_links
from pages._text import md

CLASS_POLL_S = 3  # how often a student waiting on a page asks whether the teacher opened it
BEFORE = "lessons.before"  # session key: question key -> the focus a model question's commit replaced


def verdict(choice: str, reveal) -> str:
    """The verdict as a sentence: "Right: it grows." or "You said “shrinks”; it grows." (markdown)."""
    said = md(reveal.said)
    if choice == reveal.answer:
        return f"Right: {said}."
    return f"You said “{md(shown_choice(choice))}”; {said}."


def predict_then_see(questions, results: dict | None = None, *, shown=None, texts: tuple[str, ...] = (),
                     example=None) -> bool:
    """Ask the questions in order, each once the one before is answered; an answered one shows its verdict,
    numbers, bars and why. Toy questions solve from their own state; model questions from the page's
    `results` where the page shows their example, else from `example(focus)`: the same results on the question's
    own focus, run beside the page (without it, a question about another model is not asked until a button shows
    its model). `shown`: what the page shows (its ModelChoice, or a saved result). `texts`: the texts the page
    reads; where they are a question's own example (its model shown too), the page below gives its answer away,
    or a few clicks do (a layer, a reading switch), so the rest waits until the page's questions are answered (or
    it is opened whole), as a toy page's does. Returns whether every question is answered."""
    n = len(questions)
    for i, q in enumerate(questions):
        answered = answer(q.key)
        st.session_state[UNANSWERED] = answered is None  # the path's Next waits for it (pages/_path.py)
        with st.container(border=True, key=f"lesson-{q.key.replace('.', '-')}"):
            if answered is None and example is None and not _on_screen(q, shown):
                st.markdown(f"**Question {i + 1} of {n} · predict, then see.** This question is about {md(q.about)}; "
                            "the page shows another model now.")
                st.button("Show it here, then ask", key=f"lesson.show.{q.key}", icon=":material/tune:",
                          on_click=functools.partial(_show_here, q))
                return False
            st.markdown(f"**Question {i + 1} of {n} · predict, then see.** {md(q.ask)}")
            beside = example is not None and not _example_shown(q, shown, texts)  # the page shows the reader's text
            if answered is None:
                _ask(q, results, beside)
                if _example_shown(q, shown, texts) and not skipped(q.page):
                    _rest_waits(q.page)
                return False
            if answered.reveal is None:  # a model question, on the run after its commit: judged on its example
                try:
                    answered = _judged(q, answered.choice, q.reveal(example(_example_focus(q)) if beside
                                                                    else results))
                except ValueError as err:  # the page could not show the question's state
                    st.info(f"{md(err)}. Ask again to set the page back to the question.")
                    st.button("Ask me again", key=f"lesson.again.{q.key}", on_click=functools.partial(forget, q.key))
                    return False
            _show(q, answered)
    return True


def holds_back(questions, *, shown, texts: tuple[str, ...]) -> bool:
    """Whether predict_then_see, given these texts, would hold the rest of the page back (its first unanswered
    question's own example now on the page): a part of the page that reran alone with a new text asks for the
    whole page then (pages/_partial.py)."""
    for q in questions:
        if answer(q.key) is None:
            return _example_shown(q, shown, texts) and not skipped(q.page)
    return False


def _example_shown(q, shown, texts: tuple[str, ...]) -> bool:
    """Whether the page reads a model question's own example now: its model (by name), and its text or both its
    sentences among `texts`. Its answer is then on the page, or a layer and a switch away."""
    focus = dict(getattr(q, "focus", ()))
    pair = focus.get("pair")
    own = (pair.a, pair.b) if pair is not None else (focus["text"],) if focus.get("text") else ()
    return bool(own) and _on_screen(q, shown) and all(text in texts for text in own)


def _rest_waits(page: str) -> None:
    """The rest of a page, which shows a question's answer, held back until it is answered (or opened anyway)."""
    if current_class() is not None:  # in a class, the teacher opens a page for everyone (their view's Reveal)
        st.caption("The rest of this page shows the answer: commit a prediction first (or wait for your teacher "
                   "to open it for the class).")
        _opened_by_the_teacher(page)
    else:
        st.caption("The rest of this page shows the answer: commit a prediction first, or open it without one.")
        st.button("Show the rest of the page", key="lesson.skip", icon=":material/visibility:",
                  on_click=functools.partial(skip, page))
    path_links(f"pages/{page}.py")
    st.stop()


@st.fragment(run_every=CLASS_POLL_S)
def _opened_by_the_teacher(page: str) -> None:
    """A student waiting on a page: once their teacher opens it for the class, the page runs again, whole."""
    if page_revealed(page):
        st.rerun(scope="app")


def _on_screen(q, shown) -> bool:
    """Whether a question's model is the one the page shows (`shown` None: the page does not say). A model is its
    name: the same model in another precision is still the question's subject (committing keeps the precision)."""
    model = dict(getattr(q, "focus", ())).get("model")
    return shown is None or model is None or getattr(shown, "name", shown) == model.name


def _question_focus(q, focus) -> dict:
    """The focus fields a model question sets: its example, in the precision the page already shows its model in."""
    fields = dict(q.focus)
    model = fields.get("model")
    if model is not None and focus.model is not None and focus.model.name == model.name and focus.saved is None:
        fields["model"] = focus.model
    return fields


def questions_first(questions, path: str) -> None:
    """A toy page's questions; until they are answered (or skipped), the rest of the page, which would give
    their answers away, waits: the page ends here with a button that opens it anyway. An address carrying the
    page's settings waits too (a reload or a shared link must not show the answers first)."""
    if predict_then_see(questions) or skipped(Path(path).stem):
        return
    _rest_waits(Path(path).stem)


def _ask(q, results, beside: bool = False) -> None:
    for term in getattr(q, "terms", ()):  # what the answer rests on, said before it is asked
        st.markdown(f"*{md(term)}*: {md(definition(term))}")
    with st.form(f"lesson.form.{q.key}", border=False):
        st.radio("Your prediction", q.choices, index=None, key=f"lesson.choice.{q.key}", horizontal=True,
                 format_func=shown_choice)
        if beside:
            st.caption(f"Committing answers it on {md(q.about)}, here in this box; the page keeps your sentence.")
        elif hasattr(q, "focus"):
            st.caption(f"Committing shows {md(q.about)} on this page.")
        st.form_submit_button("Commit, then see", type="primary",
                              on_click=functools.partial(_commit, q, results, beside))


def _show(q, answered: Answered) -> None:
    """An answer as it was judged, on the question's own example: a page moved on since (another sentence,
    another model) does not judge it again."""
    reveal = answered.reveal
    (st.success if answered.right else st.info)(f"{verdict(answered.choice, reveal)} "
                                                f"{md(_sentence(reveal.numbers))} {md(_sentence(reveal.why))}")
    if reveal.bars:
        st.plotly_chart(reveal_bars(reveal), key=f"lesson.bars.{q.key}", config={"displayModeBar": False})
    row = st.container(horizontal=True)  # buttons side by side, wrapping when narrow (columns cut their labels)
    row.button("Ask me again", key=f"lesson.again.{q.key}", on_click=functools.partial(forget, q.key, q.page))
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


def _show_here(q) -> None:
    """A question about another model than the page's: the page set to the question's example, and the learner's
    focus kept, to be given back once answered ("Back to your text")."""
    st.session_state.setdefault(BEFORE, {})[q.key] = current()
    update(**dict(q.focus))


def _example_focus(q):
    """The visit's focus with a model question's example in it: what `example` runs the question on."""
    focus = current()
    return focus.replace(**_question_focus(q, focus))


def _commit(q, results, beside: bool = False) -> None:
    choice = st.session_state.get(f"lesson.choice.{q.key}")
    if choice is None:
        st.toast("Pick an answer first.")
        return
    if results is None:  # a toy question: judged from its own state now; the page's widgets stay as they are
        _judged(q, choice, q.reveal())
    elif beside:  # judged on its example beside the page, on the next run (predict_then_see): the page stays
        record(q.key, Answered(choice), q.page)
    else:  # a model question: judged once the page has run on its example (predict_then_see)
        record(q.key, Answered(choice), q.page)
        _set_state(q)


def _set_state(q) -> None:
    """The page set to a question's own state: a model question's focus, or a toy page's widgets."""
    if hasattr(q, "focus"):
        before = current()
        fields = _question_focus(q, before)
        if before != before.replace(**fields):  # the reader's own text, kept to go back to ("Back to your text")
            st.session_state.setdefault(BEFORE, {})[q.key] = before
        update(**fields)
        return
    for key, value in q.state:
        st.session_state[key] = value
    skip(q.page)  # the page is open: the state is drawn


def _judged(q, choice, reveal) -> Answered:
    answered = Answered(choice, reveal)
    record(q.key, answered, q.page)
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


