"""Home: what the app is, and a link to every page (pages/_site.py lists them)."""

import streamlit as st

from pages._frame import ensure_app_frame
from pages._learner import current_class, forget_everything, next_step, path, progress, unstored, was_seen
from pages._path import go_on
from pages._prose import EXPLAINED, explained, fresh_page
from pages._site import SECTIONS, entry
from pages._text import md

ensure_app_frame()

st.title("Attention Explorer")
st.markdown(
    "Attention in transformers, **every step of the math on screen**: drag a slider on a toy query and "
    "watch the scores, the softmax weights and the output move; then open a real pretrained model and "
    "see, head by head, what a word looks at. Everything runs offline on this machine."
)
st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V")

fresh_page()  # each term explained on hover where it first appears on this page


def line(text: str) -> None:
    """A caption of our own prose, its glossary terms explained on hover where they first appear."""
    st.caption(explained(text, st.session_state[EXPLAINED]), unsafe_allow_html=True)


klass = current_class()
steps = path()  # the app's path, or the lesson of the learner's class
st.subheader(f"Your lesson in {md(klass.title)}" if klass else "Start here: a path through attention")
seen_pages, answered, right = progress()
total_minutes = sum(entry(p).minutes for p in steps)
kept = ("kept for this browser: a reload, a new tab or a return tomorrow counts what you did (your sentence and "
        "settings travel in the page's link)" if unstored() is None
        else "kept in this tab only (the app's database could not be opened)")
st.markdown(f"{len(steps)} pages{'' if klass else ', from a toy lookup to what a real model' + chr(39) + 's heads do'}"
            f", about {total_minutes} minutes in all. Each page explains, then asks you to **predict** before it "
            f"shows; your place and answers are {kept}. So far: **{seen_pages} of {len(steps)}** pages "
            f"opened, **{answered}** "
            f"question{'' if answered == 1 else 's'} answered, **{right}** right.")
for number, step in enumerate(steps, 1):  # a link, then its line: two columns clipped the titles at 800 px
    page = entry(step)
    st.page_link(step, label=f"{number}. {page.title} · about {page.minutes} min",
                 icon=":material/check_circle:" if was_seen(step) else page.icon)
    line(page.line)
upcoming = next_step()  # after the step the learner was on last: not back to step 1 for a page skipped
if upcoming is not None and st.button(f"{'Continue' if seen_pages else 'Start'}: {entry(upcoming).title}",
                                      icon=":material/arrow_forward:", type="primary", key="path.start"):
    go_on(upcoming)

st.subheader("Every page")
for section, entries in SECTIONS.items():
    st.markdown(f"**{section}**")
    for page in entries:
        st.page_link(page.path, label=page.title, icon=page.icon)
        line(page.line)

st.caption("The examples come from well-known introductions to attention; the README lists them.")
if klass is not None:
    st.caption(f"Your answers belong to the class {md(klass.title)} until its teacher deletes it.")
elif seen_pages or answered:
    if st.button("Start afresh: forget my answers and pages", icon=":material/restart_alt:", key="learner.forget"):
        st.session_state["learner.forgetting"] = True
    if st.session_state.get("learner.forgetting"):
        st.warning("This deletes the pages you opened and every answer you gave, here and on the server.")
        row = st.container(horizontal=True)
        if row.button("Yes, forget them", type="primary", key="learner.forget.yes"):
            forget_everything()
            st.session_state.pop("learner.forgetting", None)
            st.rerun()
        if row.button("Keep them", key="learner.forget.no"):
            st.session_state.pop("learner.forgetting", None)
            st.rerun()
