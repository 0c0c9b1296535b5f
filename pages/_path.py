"""The learner's path through the pages (pages/_site.py holds its order): a page's opening (`intro`: its step
and what it shows), Back and Next at its end (`path_links`), and the close of the path on its last page.
Where the learner stands comes from pages/_learner.py.
"""

from typing import NoReturn

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from pages._focus import switch_to
from pages._learner import current_class, last_step, next_step, progress, was_seen
from pages._learner import path as steps
from pages._prose import fresh_page, prose
from pages._site import entry
from pages._text import md

ARRIVED = "lessons.arrived"  # session key: the page the path's Next (or Home's Start) is opening
LINKS_DRAWN = "path.links_drawn"  # session key: whether this run has drawn Back and Next (path_links)
PAGE = "path.page"  # session key: the page this run draws (its path; None for Home)
UNANSWERED = "path.unanswered"  # session key: whether this run asked a question not yet answered (pages/_lessons.py)
PASSING = "path.passing"  # session key: the page whose Next was pressed past an unanswered question (asked once)


def page_starts(path: str | None) -> None:
    """app.py, before a page runs: which page it is (its path; None for Home), and no Back and Next drawn yet."""
    st.session_state[PAGE] = path
    st.session_state[LINKS_DRAWN] = False
    st.session_state[UNANSWERED] = False


def stop_here() -> NoReturn:
    """End the page here, after a message that says why (a text it cannot read, a model that will not load), with
    its Back and Next still under it: without them Model heads and Predictions ended on the message alone, the way
    on gone (issue 68). Streamlit draws nothing after st.stop(), so they come first. Inside a fragment's rerun the
    page's own are on screen already."""
    path = st.session_state.get(PAGE)
    ctx = get_script_run_ctx()
    if path is not None and not st.session_state.get(LINKS_DRAWN) and not (ctx and ctx.fragment_ids_this_run):
        path_links(path)
    st.stop()


def intro(path: str, what: str) -> None:
    """The top of a page: its step on the path ("Step 3 of 11") and what it shows and why, each glossary
    term explained on hover where it first appears (later prose on the page goes through `prose`)."""
    fresh_page()
    route, klass = steps(), current_class()
    if path in route:
        where = f"the lesson of {md(klass.title)}" if klass else "the learner's path"
        st.caption(f"{'Page' if klass else 'Step'} {route.index(path) + 1} of {len(route)} of {where} · about "
                   f"{entry(path).minutes} min")
    prose(what)


def path_links(path: str) -> None:
    """Back and Next along the path, at the end of a page; the last page closes the path with what the learner
    has seen and where to go next. Off the path, Back returns to the step the learner was on and "Continue the
    path" goes on from there (a step-7 learner who opened Head atlas is not sent to step 1). Each button on a
    row of its own: side by side, "Next: Step by step: self-attention" was cut at 800 px."""
    st.session_state[LINKS_DRAWN] = True
    st.divider()
    route = steps()  # the app's path, or the lesson of the learner's class
    if path in route:
        i = route.index(path)
        before, after = (route[i - 1] if i > 0 else "pages/home.py"), (route[i + 1] if i + 1 < len(route) else None)
    else:
        before, after = last_step() or "pages/home.py", next_step()
    if after is None and path in route:
        _the_end()
    if after is not None:
        _next(path, after, "Next" if path in route else "Continue the path")
    elif path not in route:
        st.caption("You have seen every page of the path.")
    back = entry(before)
    if st.button(f"Back: {back.title}", icon=":material/arrow_back:", key="path.back"):
        switch_to(before)


def _next(path: str, after: str, verb: str) -> None:
    """The path's Next: the primary button once the page's questions are answered; before, a plain one (the
    question's "Commit, then see" is the one to press), which asks once before it leaves a question unanswered."""
    waiting = bool(st.session_state.get(UNANSWERED))
    if waiting and st.session_state.get(PASSING) == path:
        st.warning("The question above is not answered yet: a prediction made before you see the answer is the "
                   "point of it.")
        row = st.container(horizontal=True)
        if row.button("Answer it first", key="path.stay", icon=":material/edit:", type="primary"):
            st.session_state.pop(PASSING, None)
            st.rerun()
        if row.button(f"Skip it and go on: {entry(after).title}", key="path.skip", icon=":material/arrow_forward:"):
            st.session_state.pop(PASSING, None)
            go_on(after)
        return
    if st.button(f"{verb}: {entry(after).title}", icon=":material/arrow_forward:", key="path.next",
                 type="secondary" if waiting else "primary"):
        if waiting:
            st.session_state[PASSING] = path
            st.rerun()
        go_on(after)


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
    route, klass = steps(), current_class()
    with st.container(border=True, key="path-end"):
        st.markdown(f"**The end of the lesson of {md(klass.title)}.** You have seen:" if klass else
                    "**The end of the path.** You have followed attention from a lookup in a table to the "
                    "heads of two real models:")
        prose("  \n".join(f"{'✓' if was_seen(p) else '○'} **{md(entry(p).title)}**: {entry(p).line}" for p in route))
        st.markdown(f"{pages_seen} of {len(route)} pages seen; {answered} question{'' if answered == 1 else 's'} "
                    f"answered, {right} right.")
        st.markdown("**Where to go next.** Type your own sentence on Model heads and follow a head you find "
                    "into Inside one head; see what every head does across many texts on A head across a "
                    "corpus; or read the pages off the path:")
        for p in ("pages/head_atlas.py", "pages/corpus.py", "pages/scoring.py", "pages/toy_ambiguity.py"):
            st.page_link(p, label=entry(p).title, icon=entry(p).icon)
