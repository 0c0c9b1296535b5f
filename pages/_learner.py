"""What the learner has done, in one place: the pages seen, the answers given, the pages whose questions were
opened without an answer (skipped), the step of the path opened last, and the class joined.

Every read and write of the learner's progress goes through here (pages/_lessons.py asks the questions,
pages/home.py and the path's links read where the learner stands). It is kept in the database
(attention.classroom.progress) against an anonymous id the browser keeps in a cookie, so a reload, a new tab or a
return next day resumes; `begin()` (app.py, every run) reads it into st.session_state under the keys below, and
each write goes to the database before the page says it was taken.

    seen("lookup"); was_seen("pages/lookup.py")          # by URL name, by path
    record(key, Answered(choice, reveal)); answer(key)   # a question's answer, once judged
    progress()                                           # (path pages seen, answered, right)
    path()                                               # the pages the learner follows: their class's route
"""

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from attention.classroom import (
    ClassInfo,
    StoredAnswer,
    class_of,
    farewell,
    forget_answer,
    forget_learner,
    mark_seen,
    mark_skipped,
    new_token,
    progress_of,
    purge,
    record_answer,
    retention,
)
from attention.toy.reveal import Reveal
from pages._live import COMPONENTS
from pages._site import PATH
from pages._text import md

ANSWERS = "lessons.answers"  # session key: question key -> Answered
SEEN = "lessons.seen"  # session key: the pages opened, by URL name ("lookup": pages/lookup.py)
SKIPPED = "lessons.skipped"  # session key: the pages whose questions the learner skipped, by URL name
LAST_STEP = "lessons.last_step"  # session key: the page of the path opened last, by its path
CLASS = "lessons.class"  # session key: the learner's class (attention.classroom.ClassInfo), or None
TOKEN = "learner.token"  # session key: the learner's anonymous id, as the cookie keeps it
UNSTORED = "learner.unstored"  # session key: why the database could not be read (progress kept in the tab only)
COOKIE = "attention_explorer_learner"  # the cookie that keeps the id in the browser

_cookie = st.components.v2.component("attention_explorer_learner",
                                     js=(COMPONENTS / "learner.js").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Answered:
    """A question answered: the learner's choice and, once judged, the answer it was judged against."""

    choice: str
    reveal: object | None = None  # attention.toy.reveal.Reveal; None until a model question's page has run

    @property
    def right(self) -> bool | None:
        """Whether the choice is the answer (None until judged)."""
        return None if self.reveal is None else self.choice == self.reveal.answer


def begin() -> None:
    """This browser's id kept (its cookie), and what is kept for it read into the session (app.py, before each page
    runs): another tab's answers, or a process restarted since, read the same."""
    reload()
    token = st.session_state[TOKEN]
    if cookies().get(COOKIE) != token:  # a new id, or one another tab replaced: the browser keeps (or tells) it
        kept_for = int(retention().total_seconds())  # as long as the database keeps an inactive learner
        with st.sidebar:
            _cookie(key="learner.cookie", data={"name": COOKIE, "token": token, "max_age": kept_for},
                    on_token_change=_adopt, height="content")


@functools.cache
def _purged() -> None:
    """Once per process: what the operator's retention no longer allows, deleted (attention.classroom.purge)."""
    purge()


def reload() -> None:
    """Read what is kept for this browser into the session again (after joining a class, say). Where the database
    cannot be opened, the tab keeps its own progress and `unstored()` says why."""
    token = _token()
    try:
        _purged()
        kept = progress_of(token)
        klass = class_of(token) if kept.class_id is not None else None
    except Exception as error:  # noqa: BLE001 — a database the operator misconfigured must not take the pages down
        st.session_state[UNSTORED] = f"{type(error).__name__}: {error}"[:300]
        return
    if klass is None and (CLASS not in st.session_state or st.session_state[CLASS] is not None):
        _class_gone(token)  # a session's first read, or its class gone since the last
    st.session_state.pop(UNSTORED, None)
    st.session_state[ANSWERS] = {key: _answered(a) for key, a in kept.answers.items()}
    st.session_state[SEEN] = set(kept.seen)
    st.session_state[SKIPPED] = set(kept.skipped)
    st.session_state[LAST_STEP] = None if kept.last_step is None else f"pages/{kept.last_step}.py"
    st.session_state[CLASS] = klass


def _class_gone(token: str) -> None:
    """A class this browser was in, deleted by its teacher since: said once (attention.classroom.farewell), in a
    note that stays until closed (a rerun does not take it away), for the student's answers in it went with it."""
    title = farewell(token)
    if title is not None:
        st.toast(f"Your class {md(title)} was deleted by its teacher, with your answers in it. You go on as a "
                 "visitor: the learner's path, from the start.", icon=":material/info:", duration="infinite")


def _token() -> str:
    """This browser's id: the session's, else the cookie's, else a new one (which the cookie then keeps)."""
    token = st.session_state.get(TOKEN)
    if token is None:
        token = cookies().get(COOKIE) or new_token()
        st.session_state[TOKEN] = token
    return token


def cookies() -> dict:
    """The cookies of the browser's request (empty in AppTest, which makes none)."""
    try:
        return dict(st.context.cookies)
    except Exception:  # noqa: BLE001 — no browser request (AppTest): the session's id alone
        return {}


def _adopt() -> None:
    """Another tab set the browser's id first: this one takes it (and its progress)."""
    told = (st.session_state.get("learner.cookie") or {}).get("token")
    if told:
        st.session_state[TOKEN] = told


def _stored(action, *args, **kwargs) -> None:
    """A write to the database; where it cannot be made, the tab keeps the answer and says why once."""
    if UNSTORED in st.session_state:
        return
    try:
        action(st.session_state[TOKEN], *args, **kwargs)
    except Exception as error:  # noqa: BLE001
        st.session_state[UNSTORED] = f"{type(error).__name__}: {error}"[:300]


def _answered(kept: StoredAnswer) -> Answered:
    if kept.reveal is None:
        return Answered(kept.choice)
    fields = dict(kept.reveal)
    fields["bars"] = tuple((str(label), float(value)) for label, value in fields.get("bars", ()))
    return Answered(kept.choice, Reveal(**fields))


def unstored() -> str | None:
    """Why progress is kept in this tab only (the database could not be read or written), or None."""
    return st.session_state.get(UNSTORED)


def answer(key: str) -> Answered | None:
    """The learner's answer to question `key`, or None."""
    return st.session_state.get(ANSWERS, {}).get(key)


def record(key: str, answered: Answered, page: str) -> None:
    """Keep the learner's answer to question `key`, asked on `page` (URL name)."""
    reveal = None if answered.reveal is None else dataclasses.asdict(answered.reveal)
    _stored(record_answer, key, page, answered.choice, reveal=reveal,
            answer=None if answered.reveal is None else answered.reveal.answer)
    st.session_state.setdefault(ANSWERS, {})[key] = answered


def forget(key: str, page: str | None = None) -> None:
    """A question asked again: its answer forgotten, and (with `page`, by URL name) its page no longer skipped."""
    _stored(forget_answer, key, page)
    st.session_state.get(ANSWERS, {}).pop(key, None)
    if page is not None:
        st.session_state.get(SKIPPED, set()).discard(page)


def forget_everything() -> None:
    """Everything kept about this browser deleted, here and in the database (Home's "Start afresh")."""
    _stored(forget_learner)
    for key in (ANSWERS, SEEN, SKIPPED, LAST_STEP, CLASS):
        st.session_state.pop(key, None)


def skip(page: str) -> None:
    """The page `page` (URL name) opened whole before its questions were answered."""
    _stored(mark_skipped, page)
    st.session_state.setdefault(SKIPPED, set()).add(page)


def skipped(page: str) -> bool:
    """Whether the page `page` (URL name) is open whole before its questions were answered: the learner chose
    so, or their class's teacher revealed it."""
    klass = current_class()
    return page in st.session_state.get(SKIPPED, set()) or (klass is not None and page in klass.revealed)


def page_revealed(page: str) -> bool:
    """Whether the learner's teacher has opened `page` for the class now (read from the database, not the session:
    a page waiting for it asks again)."""
    try:
        klass = class_of(st.session_state[TOKEN])
    except Exception:  # noqa: BLE001 — the database unreachable: the page keeps waiting
        return False
    return klass is not None and page in klass.revealed


def current_class() -> ClassInfo | None:
    """The class this browser joined, or None."""
    return st.session_state.get(CLASS)


def path() -> tuple[str, ...]:
    """The pages the learner follows, in order (their paths): their class's route, else the app's path."""
    klass = current_class()
    return PATH if klass is None else tuple(f"pages/{name}.py" for name in klass.route)


def seen(name: str) -> None:
    """Note that the learner opened the page `name` (its URL name; app.py calls it for every page)."""
    step = next((p for p in path() if Path(p).stem == name), None)
    if name not in st.session_state.get(SEEN, set()) or (step is not None and step != last_step()):
        _stored(mark_seen, name, step=step is not None)
    st.session_state.setdefault(SEEN, set()).add(name)
    if step is not None:
        st.session_state[LAST_STEP] = step


def was_seen(path: str) -> bool:
    """Whether the learner opened the page at `path` ("pages/lookup.py")."""
    return Path(path).stem in st.session_state.get(SEEN, set())


def last_step() -> str | None:
    """The page of the path the learner opened last (its path), or None."""
    return st.session_state.get(LAST_STEP)


def next_step() -> str | None:
    """Where the path goes on from: the first page not seen after the step the learner was on last, else the
    first page not seen at all; None once every page was seen (Home's Continue, and "Continue the path" off it)."""
    steps, last = path(), last_step()
    later = steps[steps.index(last) + 1:] if last in steps else steps
    return next((p for p in (*later, *steps) if not was_seen(p)), None)


def progress() -> tuple[int, int, int]:
    """(path pages seen, questions answered, of them right as far as judged)."""
    answers = st.session_state.get(ANSWERS, {})
    return sum(was_seen(p) for p in path()), len(answers), sum(1 for a in answers.values() if a.right)
