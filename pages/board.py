"""The class's board: what the teacher projects. No key and no controls: the class's code and its join link in large
type, then the class's answers to the one question the teacher chose on the control view (pages/classroom.py),
read again every REFRESH_S seconds (attention.classroom.board_class, summarize; pages/_class_view.py draws it)."""

import streamlit as st

from attention.classroom import ClassError, board_class, class_answers, normal_code, summarize
from pages._class_view import answers_card, join_link, lesson_questions
from pages._frame import ensure_app_frame
from pages._text import md

ensure_app_frame()
REFRESH_S = 2
# The room reads it from its back row: no sidebar, no header, large type.
BOARD = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stHeader"] { display: none; }
[data-testid="stMainBlockContainer"] { padding-top: 1.5rem; }
[data-testid="stMainBlockContainer"] [data-testid="stMarkdownContainer"] p { font-size: 1.6rem; }
.st-key-board-code [data-testid="stMarkdownContainer"] p { font-size: 2.4rem; line-height: 1.3;
  overflow-wrap: anywhere; }
@media (max-width: 640px) { .st-key-board-code [data-testid="stMarkdownContainer"] p { font-size: 1.5rem; } }
</style>"""


@st.fragment(run_every=REFRESH_S)
def _board(code: str) -> None:
    try:
        klass = board_class(code)
    except ClassError as error:
        st.info(str(error))
        return
    with st.container(key="board-code"):
        st.markdown(f"**{md(klass.title)}** · join at **{join_link(klass.code)}**  \nor on the **A class** page "
                    f"with the code **{klass.code}**" + (" (the class is closed)" if klass.closed else ""))
    questions = lesson_questions(klass.route)
    shown = [(n, q) for n, q in enumerate(questions, 1) if q.key == klass.shown_question]
    if not shown:
        st.markdown("The teacher has not put a question on the board yet.")
        return
    n, question = shown[0]
    summary = summarize(class_answers(klass), [(question.key, question.page, question.choices)])[0]
    answers_card(n, question, summary, large=True, whys=False)


code = normal_code(st.query_params.get("code", ""))
if code:
    st.html(BOARD)
    _board(code)
else:
    st.title("A class's board")
    st.caption("What a teacher projects: the class's code and link, then the answers to the question chosen on the "
               "teacher's view. It shows no names and no key. Its teacher's view opens it with the code filled in.")
    with st.form("board.code"):
        typed = st.text_input("The class's code", max_chars=12, key="board.typed")
        if st.form_submit_button("Show the board", type="primary") and typed.strip():
            st.query_params["code"] = normal_code(typed)
            st.rerun()
