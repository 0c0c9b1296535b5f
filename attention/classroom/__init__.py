"""A classroom: what a learner has done, kept against an anonymous id, and classes a teacher opens and reads.

Kept in a real database (attention.classroom.database: SQLite by default, PostgreSQL by URL; schema by Alembic
migrations). Imports neither Streamlit nor torch: the pages (pages/_learner.py, pages/classroom.py) call it.

    from attention.classroom import open_class, join_class, teacher_class, summarize
"""

from attention.classroom.classes import (
    AnswerRow,
    ClassError,
    ClassInfo,
    NotTeacher,
    OpenedClass,
    Student,
    board_class,
    class_answers,
    class_of,
    class_students,
    close_class,
    delete_class,
    farewell,
    join_class,
    leave_class,
    let_browsers_try_again,
    nickname,
    normal_code,
    open_class,
    purge,
    reopen_class,
    retention,
    rotate_key,
    set_reveal,
    show_question,
    teacher_class,
    wrong_codes_lately,
)
from attention.classroom.database import data_dir, database, database_url, migrate, session
from attention.classroom.progress import (
    Progress,
    StoredAnswer,
    forget_answer,
    forget_learner,
    mark_seen,
    mark_skipped,
    new_token,
    progress_of,
    record_answer,
)
from attention.classroom.routes import ROUTES, Route
from attention.classroom.schema import NICKNAME_CHARS
from attention.classroom.summary import QuestionSummary, answers_csv, summarize

__all__ = [
    "NICKNAME_CHARS", "ROUTES", "AnswerRow", "ClassError", "ClassInfo", "NotTeacher", "OpenedClass", "Progress",
    "QuestionSummary", "Route", "StoredAnswer", "Student", "answers_csv", "board_class", "class_answers",
    "class_of", "class_students", "close_class", "data_dir", "database", "database_url", "delete_class",
    "farewell", "forget_answer", "forget_learner", "join_class", "leave_class", "let_browsers_try_again", "mark_seen",
    "mark_skipped", "migrate", "new_token", "nickname", "normal_code", "open_class", "progress_of", "purge",
    "record_answer", "reopen_class", "retention", "rotate_key", "session", "set_reveal", "show_question", "summarize",
    "teacher_class", "wrong_codes_lately",
]
