"""A class: a student joins with the code on the board; a teacher opens one, picks its route, and watches the class's
answers arrive (attention.classroom keeps them; attention.figures.class_answers draws each question's)."""

import functools

import streamlit as st

from attention.classroom import (
    NICKNAME_CHARS,
    ROUTES,
    ClassError,
    NotTeacher,
    answers_csv,
    class_answers,
    class_students,
    close_class,
    delete_class,
    join_class,
    leave_class,
    open_class,
    purge,
    set_reveal,
    summarize,
    teacher_class,
)
from attention.figures import class_answers as class_answers_chart
from pages._frame import ensure_app_frame
from pages._learner import TOKEN, current_class, last_step, next_step, reload
from pages._lessons import shown_choice
from pages._site import entry
from pages._text import md

ensure_app_frame()
PAGE = "pages/classroom.py"
TEACHER = "classroom.teacher"  # session key: (code, secret) of the class this browser teaches
REFRESH_S = 2  # the teacher's view reads the class's answers again this often
DELETED = "classroom.deleted"  # session key: the title of the class its teacher just deleted


def _client() -> str:
    """The student's address as the join codes' rate limit counts it: nginx's X-Real-IP behind `make class`."""
    address = str(st.context.ip_address or "")
    forwarded = str((st.context.headers or {}).get("X-Real-Ip") or "")
    if address in ("127.0.0.1", "::1", "") and forwarded:
        return forwarded
    return address or "unknown"


def _questions(pages: tuple[str, ...]) -> list:
    """The questions of `pages`, in the route's order: the toy pages' and the model pages'."""
    from attention.toy.questions import questions_for

    found = []
    for page in pages:
        found += questions_for(page)
        if not questions_for(page):
            from attention.models import model_questions_for  # imports torch: only when a model page is asked

            found += model_questions_for(page)
    return found


def _title(page: str) -> str:
    return entry(f"pages/{page}.py").title


st.title("A class")
teacher_link = st.query_params.get("teach"), st.query_params.get("key")
if all(teacher_link):
    st.session_state[TEACHER] = teacher_link


def _student() -> None:
    klass = current_class()
    if klass is not None:
        st.success(f"You are in **{md(klass.title)}** (code {klass.code}). Your lesson: "
                   f"{', '.join(md(_title(p)) for p in klass.route)}.")
        upcoming = next_step()
        if upcoming is None:
            st.caption("You have opened every page of the lesson.")
        else:
            st.page_link(upcoming, label=f"{'Continue' if last_step() else 'Start'}: {entry(upcoming).title}",
                         icon=":material/arrow_forward:")
        if st.button("Leave the class", icon=":material/logout:"):
            leave_class(st.session_state[TOKEN])
            reload()
            st.rerun()
        return
    st.subheader("Join a class")
    st.caption("Your answers go to your teacher's screen with the nickname you give (or none). Nothing else about "
               "you is kept: this browser holds a random id, the app keeps the pages you opened and your answers.")
    with st.form("classroom.join"):
        code = st.text_input("The class's code (on the board)", value=st.query_params.get("join", ""), max_chars=12)
        name = st.text_input("A nickname (optional)", max_chars=NICKNAME_CHARS)
        if st.form_submit_button("Join", type="primary"):
            try:
                join_class(st.session_state[TOKEN], code, name, client=_client())
            except ClassError as error:
                st.error(str(error))
            else:
                reload()
                st.rerun()


def _open() -> None:
    st.subheader("Teach a class")
    st.text_input("Its name (students see it)", value="Attention", max_chars=80, key="classroom.title")
    route = st.radio("The lesson", list(ROUTES), format_func=lambda r: f"{ROUTES[r].title} · "
                     f"about {ROUTES[r].minutes} min", captions=[ROUTES[r].line for r in ROUTES], key="classroom.route")
    if st.button("Open the class", type="primary", key="classroom.open"):  # a button, not a form: Enter opens nothing
        purge()  # what the retention no longer allows goes first
        opened = open_class(st.session_state["classroom.title"], ROUTES[route].pages)
        st.session_state[TEACHER] = (opened.code, opened.secret)
        st.query_params.update(teach=opened.code, key=opened.secret)
        st.rerun()


def _teacher(code: str, secret: str) -> None:
    try:
        klass = teacher_class(code, secret)
    except NotTeacher as error:
        st.error(str(error))
        st.session_state.pop(TEACHER, None)
        return
    st.markdown(f"## {md(klass.title)} · code **{klass.code}**")
    join = f"{str(st.context.url or '').split('?')[0]}?join={klass.code}"
    if klass.closed:
        st.warning("This class is closed: no one can join it. Students already in it can go on answering; their "
                   "answers still arrive here.")
    else:
        st.markdown(f"For the board: **{md(join)}** (or the app's **A class** page and the code **{klass.code}**).")
    st.caption("This page's address is your teacher's link: it holds the class's key, shown once and kept only as "
               "a hash, so bookmark it and do not share it. The class's answers are deleted "
               f"{klass.delete_after:%Y-%m-%d} (UTC), or now, below. Each student's first prediction is what counts "
               "here: asking a question again after seeing the answer does not change it.")
    st.page_link("pages/handout.py", label="The lesson's questions and answer key, to print",
                 icon=":material/print:", query_params={"teach": klass.code, "key": secret})
    _live(klass.code, secret)
    st.subheader("Open a page for the class")
    st.caption("A page's questions hold the rest of it back until a student answers; opening it shows everyone the "
               "whole page (to discuss the answers together).")
    for page in klass.route:
        st.toggle(f"{_title(page)}", value=page in klass.revealed, key=f"classroom.reveal.{page}",
                  on_change=functools.partial(_reveal, klass, page))
    st.subheader("The class's data")
    rows = class_answers(klass)
    st.download_button("Download the answers (CSV)", answers_csv(rows), file_name=f"class-{klass.code}.csv",
                       mime="text/csv", icon=":material/download:")
    row = st.container(horizontal=True)
    if not klass.closed and row.button("Close the class (no one joins any more)", key="classroom.close"):
        close_class(klass)
        st.rerun()
    if row.button("Delete the class and every answer now", type="secondary"):
        st.session_state["classroom.deleting"] = True
    if st.session_state.get("classroom.deleting"):
        st.warning("This deletes the class, its students' progress in it and their answers. It cannot be undone.")
        if st.button("Yes, delete it", type="primary"):
            delete_class(klass)
            st.session_state.pop(TEACHER, None)
            st.session_state.pop("classroom.deleting", None)
            st.session_state[DELETED] = klass.title
            st.query_params.clear()
            st.rerun()


def _reveal(klass, page: str) -> None:
    set_reveal(klass, page, bool(st.session_state[f"classroom.reveal.{page}"]))


@st.fragment(run_every=REFRESH_S)
def _live(code: str, secret: str) -> None:
    """What the class answered, read again every REFRESH_S seconds."""
    klass = teacher_class(code, secret)
    students = class_students(klass)
    rows = class_answers(klass)
    joined, answers = ("" if len(students) == 1 else "s"), ("" if len(rows) == 1 else "s")
    st.markdown(f"**{len(students)}** student{joined} joined; **{len(rows)}** answer{answers}.")
    if students:
        st.table({"student": [s.name for s in students],  # an HTML table: names as text, readable when printed
                      "on the page": [_title(s.step) if s.step else "—" for s in students],
                  "answered": [s.answered for s in students], "right": [s.right for s in students]},
                 hide_index=True)
    questions = _questions(klass.route)
    summaries = summarize(rows, [(q.key, q.page, q.choices) for q in questions])
    for n, (q, summary) in enumerate(zip(questions, summaries, strict=True), 1):
        with st.container(border=True):
            st.markdown(f"**{n}. {md(_title(q.page))}** · {md(q.ask)}")
            if not summary.answered:
                st.caption("No answers yet.")
                continue
            right = summary.share_right
            st.caption(f"{summary.answered} answered" + ("" if right is None else
                                                        f"; {right:.0%} right (the answer: "
                                                        f"{md(shown_choice(summary.answer))})"))
            st.plotly_chart(class_answers_chart(summary, shown=shown_choice), key=f"classroom.chart.{q.key}",
                            config={"displayModeBar": False})
            for choice, count, why in summary.wrong[:2]:  # the most common wrong answers, with what they reveal
                st.caption(f"{count} chose “{md(shown_choice(choice))}”: {md(q.misconception(choice))}. "
                           f"Why the answer is otherwise: {md(why)}")


if DELETED in st.session_state:
    st.success(f"The class {md(st.session_state.pop(DELETED))} and every answer in it are deleted.")
teaching = st.session_state.get(TEACHER)
if teaching:
    _teacher(*teaching)
else:
    _student()
    if current_class() is None:  # a student in a class is not offered to open one
        st.divider()
        _open()
