"""Something to hand out: a lesson's questions to print, and for its teacher the answer key, with what each wrong
choice reveals. Made from the questions the pages ask (attention.answer_key), never retyped; the browser's Print
prints this page without the sidebar and the controls (the app's print styles, app.py)."""

import streamlit as st

from attention.answer_key import answer_key, key_markdown
from attention.classroom import ROUTES, NotTeacher, teacher_class
from pages._frame import ensure_app_frame
from pages._learner import current_class
from pages._site import SECTIONS
from pages._teacher import forget, keep_link, teaching
from pages._text import md

ensure_app_frame()
TITLES = {e.path.split("/")[-1].removesuffix(".py"): e.title for entries in SECTIONS.values() for e in entries}


@st.cache_data(show_spinner="Working out the answers (the model pages' questions run their models)…")
def _key(pages: tuple[str, ...]):
    return answer_key(pages)


st.title("A handout")
keep_link()  # an old teacher's link: its key kept in this browser, taken out of the address
teacher, teaching_now = None, teaching()
if teaching_now:
    try:
        teacher = teacher_class(*teaching_now)
    except NotTeacher as error:
        st.error(str(error))
        forget()
klass = teacher or current_class()
if klass is not None:
    pages, name = klass.route, klass.title
else:
    chosen = st.selectbox("The lesson", list(ROUTES), format_func=lambda r: ROUTES[r].title, key="handout.route")
    pages, name = ROUTES[chosen].pages, ROUTES[chosen].title
answers = teacher is not None and st.toggle("With the answers (the answer key)", value=True, key="handout.answers")
note = (f"{md(name)}: the questions its pages ask, in order. Print with your browser (Ctrl+P): the sidebar and "
        "the controls are left out.")
if teacher is None:
    note += " The answer key is in the class's handout, opened from the teacher's view."
st.container(key="noprint").caption(note)  # not printed (the app's print styles)
heading = f"# {md(name)}" + (f" · class {klass.code}" if klass is not None else "")  # printed: whose handout it is
handout = f"{heading}\n\n" + key_markdown(_key(tuple(pages)), answers=answers, titles=TITLES)
st.download_button("Download as Markdown", handout, file_name=f"{'answer-key' if answers else 'questions'}.md",
                   mime="text/markdown", icon=":material/download:")
with st.container(border=True, key="handout"):
    st.markdown(handout)
