"""The teacher's key, kept off the screen (issue 71): the address of the teacher's view holds the class's code
only (`?teach=K7QM2P`, as public as the board); the key lives in the session and in a cookie of the teacher's
browser, so a reload or a new tab of the same browser still teaches, and a photo of the screen or the browser's
history gives nothing. An old teacher's link (`?teach=...&key=...`) is read once and its key taken out of the
address at once.

    keep_link()            # app runs of pages/classroom.py and pages/handout.py, first
    teaching()             # (code, key) of the class this browser teaches, or None
    remember(code, key)    # a class just opened, or its key rotated
"""

import streamlit as st

from attention.classroom import retention
from pages._learner import cookies
from pages._live import COMPONENTS

TEACHER = "classroom.teacher"  # session key: (code, key) of the class this browser teaches
WRITTEN = "classroom.teacher_cookie"  # session key: the cookie's value as this session last wrote it
COOKIE = "attention_explorer_teacher"  # the cookie: "CODE.key"
BY_LINK = "classroom.by_link"  # session key: the key came from a link's address this run (a wrong one is said)

_cookie = st.components.v2.component("attention_explorer_teacher",
                                     js=(COMPONENTS / "teacher.js").read_text(encoding="utf-8"))


def keep_link() -> None:
    """An old teacher's link's key, kept and taken out of the address (its code stays: it is on the board)."""
    code, key = st.query_params.get("teach"), st.query_params.get("key")
    if key:
        del st.query_params["key"]
        if code:
            remember(code, key)
            st.session_state[BY_LINK] = True


def remember(code: str, key: str) -> None:
    """This browser teaches the class `code`: in the session now, in the cookie from this run on."""
    st.session_state[TEACHER] = (code, key)
    st.query_params["teach"] = code


def refused() -> bool:
    """Whether a key found wrong should be said: one that came in a link's address. One the browser kept (the class
    deleted since, or its key made anew elsewhere) is forgotten without a word."""
    return bool(st.session_state.pop(BY_LINK, False))


def forget() -> None:
    """This browser no longer teaches (the class was deleted, or its key was wrong)."""
    st.session_state.pop(TEACHER, None)
    st.session_state[WRITTEN] = ""
    _write("", key="classroom.cookie-forget")


def teaching() -> tuple[str, str] | None:
    """(code, key) of the class this browser teaches: the session's, else the cookie's; None for a student."""
    found = st.session_state.get(TEACHER)
    if found is None and st.session_state.get(WRITTEN) != "":  # not forgotten in this session
        code, _, key = cookies().get(COOKIE, "").partition(".")
        if code and key:
            found = st.session_state[TEACHER] = (code, key)
    if found is not None and st.session_state.get(WRITTEN) != f"{found[0]}.{found[1]}":
        st.session_state[WRITTEN] = f"{found[0]}.{found[1]}"
        _write(st.session_state[WRITTEN], top=True)  # a class just opened: its code and link in view
    return found


def _write(value: str, *, top: bool = False, key: str = "classroom.cookie") -> None:
    with st.sidebar:
        _cookie(key=key, data={"name": COOKIE, "value": value, "top": top,
                               "max_age": int(retention().total_seconds())}, height="content")
