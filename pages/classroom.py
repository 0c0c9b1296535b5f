"""A class: a student joins with the code on the board; a teacher opens one, picks its route, and watches the class's
answers arrive on a control view meant for their own screen, while the board (pages/board.py) is what the room sees
(attention.classroom keeps the answers; pages/_class_view.py draws each question's)."""

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
    let_browsers_try_again,
    open_class,
    purge,
    reopen_class,
    rotate_key,
    set_reveal,
    show_question,
    summarize,
    teacher_class,
    wrong_codes_lately,
)
from pages._class_view import answers_card, join_link, lesson_questions, title
from pages._frame import ensure_app_frame
from pages._learner import TOKEN, current_class, last_step, next_step, reload
from pages._site import entry
from pages._teacher import forget, keep_link, refused, remember, teaching
from pages._text import md

ensure_app_frame()
PAGE = "pages/classroom.py"
REFRESH_S = 2  # the teacher's view reads the class's answers again this often
DELETED = "classroom.deleted"  # session key: the title of the class its teacher just deleted
FOLDED_FROM = 8  # students: from this many on, the table of who is where starts folded (a class of 30 fits 800 px)


def _client() -> str:
    """The student's address as the join codes' rate limit counts it: nginx's X-Real-IP behind `make class`."""
    address = str(st.context.ip_address or "")
    forwarded = str((st.context.headers or {}).get("X-Real-Ip") or "")
    if address in ("127.0.0.1", "::1", "") and forwarded:
        return forwarded
    return address or "unknown"


st.title("A class")
keep_link()  # an old teacher's link: its key kept, and taken out of the address


def _student() -> None:
    klass = current_class()
    if klass is not None:
        st.success(f"You are in **{md(klass.title)}** (code {klass.code}). Your lesson: "
                   f"{', '.join(md(title(p)) for p in klass.route)}.")
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
    st.text_input("Its name (students see it)", value="Attention", max_chars=80, key="classroom.title")
    route = st.radio("The lesson", list(ROUTES), format_func=lambda r: f"{ROUTES[r].title} · about "
                     f"{ROUTES[r].minutes} min", captions=[ROUTES[r].line for r in ROUTES], key="classroom.route")
    if st.button("Open the class", type="primary", key="classroom.open"):  # not a form: Enter opens nothing
        purge()  # what the retention no longer allows goes first
        opened = open_class(st.session_state["classroom.title"], ROUTES[route].pages)
        remember(opened.code, opened.secret)
        st.rerun()


def _teacher(code: str, secret: str) -> bool:
    """The control view; False where the key is not (or no longer) a teacher's: a link's is said, a kept one is
    forgotten without a word (its class deleted, or a new key made elsewhere), and the page is a student's."""
    try:
        klass = teacher_class(code, secret)
    except NotTeacher as error:
        if refused():
            st.error(str(error))
        forget()
        return False
    st.set_page_config(initial_sidebar_state="collapsed")  # the whole width for the class (800 px lost 300)
    st.markdown(f"## {md(klass.title)} · code **{klass.code}**")
    if klass.closed:
        st.warning("This class is closed: no one can join it. Students already in it can go on answering; their "
                   "answers still arrive here.")
    else:
        st.markdown(f"Students join at **{md(join_link(klass.code))}** (or the app's **A class** page and the code "
                    f"**{klass.code}**).")
    st.link_button("Open the board for the projector", f"board?code={klass.code}", icon=":material/cast:",
                   type="primary")
    st.caption("Your control view: keep it on your screen and project the board (the code, and the question you "
               "choose below; never your key, which this browser keeps). A student's first prediction counts; one "
               "given after you opened its page for the class (or after they opened it whole themselves, before "
               "joining) is counted apart, hatched. "
               f"Answers are deleted {klass.delete_after:%Y-%m-%d} (UTC), or now, below.")
    questions = lesson_questions(klass.route)
    keys = [None, *(q.key for q in questions)]
    shown = klass.shown_question if klass.shown_question in keys else None
    st.selectbox("The board shows", keys, index=keys.index(shown), key="classroom.board",
                 format_func=lambda k: "the code and the link only" if k is None else
                 f"question {keys.index(k)}: {questions[keys.index(k) - 1].ask}",
                 on_change=lambda: show_question(klass, st.session_state["classroom.board"]))
    with st.expander("Open a page for the class", expanded=True, key="classroom.pages"):
        st.caption("A page's questions hold the rest of it back until a student answers; opening it shows everyone "
                   "the whole page (to discuss the answers together). Answers given after it are counted apart.")
        for page in klass.route:
            st.toggle(title(page), value=page in klass.revealed, key=f"classroom.reveal.{page}",
                      on_change=functools.partial(_reveal, klass, page))
    _live(klass.code, secret, shown)
    _data(klass, secret)
    return True


def _data(klass, secret: str) -> None:
    st.subheader("The class's data and key")
    st.page_link("pages/handout.py", label="The lesson's questions and answer key, to print",
                 icon=":material/print:", query_params={"teach": klass.code})
    rows = class_answers(klass)
    st.download_button("Download the answers (CSV)", answers_csv(rows), file_name=f"class-{klass.code}.csv",
                       mime="text/csv", icon=":material/download:")
    wrong = wrong_codes_lately()
    if st.button(f"Let browsers shut out by wrong codes try again ({wrong} wrong in the last 10 minutes)",
                 key="classroom.unlock", disabled=not wrong):
        st.toast(f"Wrong codes forgotten: {let_browsers_try_again(klass)}. A student shut out can join now.")
    with st.expander("Your teacher's key: to teach from another browser (not for the projector)"):
        st.caption("This browser keeps the key. To open the control view elsewhere, use this link there; if it "
                   "was seen by anyone, make a new key: the old one then opens nothing.")
        st.code(f"{join_link(klass.code).split('?')[0]}?teach={klass.code}&key={secret}", language=None)
        if st.button("Make a new key", key="classroom.rotate"):
            remember(klass.code, rotate_key(klass))
            st.toast("A new key: this browser keeps it, and the old one opens nothing now.")
            st.rerun()
    row = st.container(horizontal=True)
    if not klass.closed and row.button("Close the class (no one joins any more)", key="classroom.close"):
        close_class(klass)
        st.rerun()
    if klass.closed and row.button("Open the class again (students can join)", key="classroom.reopen"):
        reopen_class(klass)
        st.rerun()
    if row.button("Delete the class and every answer now", type="secondary"):
        st.session_state["classroom.deleting"] = True
    if st.session_state.get("classroom.deleting"):
        st.warning("This deletes the class, its students' progress in it and their answers. It cannot be undone.")
        if st.button("Yes, delete it", type="primary"):
            delete_class(klass)
            forget()
            st.session_state.pop("classroom.deleting", None)
            st.session_state[DELETED] = klass.title
            st.query_params.clear()
            st.rerun()


def _reveal(klass, page: str) -> None:
    set_reveal(klass, page, bool(st.session_state[f"classroom.reveal.{page}"]))


@st.fragment(run_every=REFRESH_S)
def _live(code: str, secret: str, shown: str | None) -> None:
    """What the class answered, read again every REFRESH_S seconds: who is where (folded for a large class), then
    each question folded to one line but the one on the board."""
    try:
        klass = teacher_class(code, secret)
    except NotTeacher:  # deleted, or a new key made in another browser: the page says so, whole
        st.rerun(scope="app")
    students = class_students(klass)
    rows = class_answers(klass)
    joined, answers = ("" if len(students) == 1 else "s"), ("" if len(rows) == 1 else "s")
    st.markdown(f"**{len(students)}** student{joined} joined; **{len(rows)}** answer{answers}.")
    if students:
        with st.expander("Who is where", expanded=len(students) < FOLDED_FROM, key="classroom.who"):
            st.table({"student": [s.name for s in students],  # an HTML table: names as text, readable when printed
                      "on the page": [title(s.step) if s.step else "—" for s in students],
                      "answered": [s.answered for s in students], "right": [s.right for s in students]},
                     hide_index=True)
    questions = lesson_questions(klass.route)
    summaries = summarize(rows, [(q.key, q.page, q.choices) for q in questions])
    for n, (q, summary) in enumerate(zip(questions, summaries, strict=True), 1):
        late = f", {summary.late} late" if summary.late else ""
        with st.expander(f"{n}. {title(q.page)} · {summary.answered} answered{late}", expanded=q.key == shown,
                         key=f"classroom.card.{q.key}"):
            answers_card(n, q, summary)


if DELETED in st.session_state:
    st.success(f"The class {md(st.session_state.pop(DELETED))} and every answer in it are deleted.")
teaching_now = teaching()
if teaching_now and _teacher(*teaching_now):
    st.stop()
if current_class() is not None:  # a student in a class is not offered to open one
    _student()
else:  # a teacher finds "Teach a class" at the top, beside the students' way in
    join_tab, teach_tab = st.tabs(["Join a class", "Teach a class"])
    with join_tab:
        _student()
    with teach_tab:
        _open()
