"""A class: a teacher opens one and gets a join code for the board and a secret for their own link; students join
with the code (and a nickname if they like); the teacher's view reads the class's answers with the secret; a class
closes, and is deleted on request or once the operator's retention has passed.

    opened = open_class("Year 12, Tuesday", route=("lookup", "self_attention"))
    join_class(token, opened.code, "Ada", client="203.0.113.7")
    teacher = teacher_class(opened.code, opened.secret)      # ClassInfo; NotTeacher without the secret
    class_answers(teacher)                                   # every answer, with its nickname

Nothing here trusts its caller's text: nicknames are cut to NICKNAME_CHARS and kept as data; every query is
built by SQLAlchemy with bound parameters. A browser that fails BROWSER_TRIES times in JOIN_WINDOW, or an address
that fails ADDRESS_TRIES times (a school behind one address: many browsers' typos), is refused until the window
passes: at ADDRESS_TRIES per address, the codes' 31**6 (8.9e8) take decades to walk. A typo that is not a code's
shape (six of CODE_ALPHABET) is not counted.

What a teacher reads of an answer is the student's first prediction: asking a question again and answering anew
(after seeing the answer) counts an attempt but does not rewrite it.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from attention.classroom.database import session
from attention.classroom.progress import hashed, learner_id, now
from attention.classroom.schema import (
    NICKNAME_CHARS,
    Answer,
    Classroom,
    Farewell,
    Install,
    JoinAttempt,
    Learner,
    Reveal,
)

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read off a board without doubt
CODE_LENGTH = 6
BROWSER_TRIES = 10  # failed join codes one browser may try per window
ADDRESS_TRIES = 200  # failed join codes one address may try per window: a class of 40 behind one address typing
JOIN_WINDOW = timedelta(minutes=10)
RETENTION_DAYS = 30  # default; the operator sets ATTENTION_EXPLORER_RETENTION_DAYS


class ClassError(ValueError):
    """A class could not be joined or read; the message says why, in words a user can act on."""


class NotTeacher(ClassError):
    """The class's teacher secret was missing or wrong."""


@dataclass(frozen=True)
class OpenedClass:
    """A class just opened: its code (for the board) and the teacher's secret (shown once; only its hash is kept)."""

    code: str
    secret: str


@dataclass(frozen=True)
class ClassInfo:
    id: int
    code: str
    title: str
    route: tuple[str, ...]  # the pages its students follow, by URL name
    revealed: frozenset[str]  # pages the teacher opened whole for the class
    closed: bool
    opened_at: datetime
    delete_after: datetime
    shown_question: str | None = None  # the question the board (the projector's view) shows, by key


@dataclass(frozen=True)
class AnswerRow:
    """One student's answer to one question, as the teacher's view and its export read it."""

    student: str  # the nickname, or "student 3" for one who gave none
    question: str
    page: str
    choice: str  # the first prediction, made before the answer was seen
    answer: str | None  # None until judged (a model question, before its page ran)
    right: bool | None  # whether that prediction was right
    attempts: int  # answered this many times (asked again after seeing the answer: more than 1)
    last_choice: str  # the choice now (the same as `choice` unless asked again)
    why: str  # the reveal's why ("" until judged)
    answered_at: datetime
    late: bool = False  # the first prediction was given after its page was opened whole (the answer on screen)


@dataclass(frozen=True)
class Student:
    name: str
    step: str | None  # the page of the route they opened last
    answered: int
    right: int
    active_at: datetime


def retention() -> timedelta:
    """How long a class's data is kept: $ATTENTION_EXPLORER_RETENTION_DAYS days (default RETENTION_DAYS)."""
    return timedelta(days=float(os.environ.get("ATTENTION_EXPLORER_RETENTION_DAYS", RETENTION_DAYS)))


def _code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normal_code(code: str) -> str:
    """A code as typed ("k7q m2p") as kept ("K7QM2P")."""
    return "".join(code.split()).upper()


def open_class(title: str, route: tuple[str, ...]) -> OpenedClass:
    """A new class following `route` (pages by URL name)."""
    secret = secrets.token_urlsafe(24)
    title = " ".join(title.split())[:80] or "A class"
    with session() as s:
        while True:
            code = _code()
            if s.scalar(select(Classroom.id).where(Classroom.code == code)) is None:
                break
        opened = now()
        s.add(Classroom(code=code, secret_hash=hashed(secret), title=title, route=list(route), opened_at=opened,
                        delete_after=opened + retention()))
    return OpenedClass(code, secret)


def _info(s, row: Classroom) -> ClassInfo:
    revealed = frozenset(s.scalars(select(Reveal.page).where(Reveal.class_id == row.id)))
    return ClassInfo(row.id, row.code, row.title, tuple(row.route), revealed, row.closed_at is not None,
                     row.opened_at, row.delete_after, row.shown_question)


def nickname(text: str | None) -> str | None:
    """A nickname as kept: whitespace collapsed, control characters dropped, at most NICKNAME_CHARS characters;
    None when nothing is left. It is data: pages show it escaped."""
    if not text:
        return None
    kept = " ".join("".join(c for c in text if c.isprintable()).split())[:NICKNAME_CHARS]
    return kept or None


def _salted(address: str) -> str:
    """An address as the join limit keeps it: sha256 of this installation's salt and the address."""
    with session() as s:
        row = s.scalar(select(Install).where(Install.id == 1))
        if row is None:
            try:
                with s.begin_nested():
                    row = Install(id=1, salt=secrets.token_hex(32))
                    s.add(row)
            except IntegrityError:  # another process made it first
                row = s.scalar(select(Install).where(Install.id == 1))
        salt = row.salt
    return hashed(salt + address)


def _a_code(code: str) -> bool:
    return len(code) == CODE_LENGTH and set(code) <= set(CODE_ALPHABET)


def join_class(token: str, code: str, name: str | None, *, client: str) -> ClassInfo:
    """The learner `token` joins the class `code` as `name`. ClassError when the code is not a code's shape, unknown
    or closed, or when this browser or `client` (its address) has failed too often in JOIN_WINDOW."""
    code = normal_code(code)
    if not _a_code(code):
        raise ClassError(f"A class's code is {CODE_LENGTH} letters and digits (no 0, O, 1, I or L): check it on the "
                         "board.")
    address, browser = _salted(client), hashed(token)
    with session() as s:
        since = now() - JOIN_WINDOW
        failed = select(func.count()).select_from(JoinAttempt).where(JoinAttempt.at > since)
        if (s.scalar(failed.where(JoinAttempt.browser == browser)) >= BROWSER_TRIES
                or s.scalar(failed.where(JoinAttempt.client == address)) >= ADDRESS_TRIES):
            raise ClassError(f"Too many wrong codes: try again in {JOIN_WINDOW.seconds // 60} minutes.")
        row = s.scalar(select(Classroom).where(Classroom.code == code))
        ok = row is not None and row.closed_at is None
        if not ok:  # kept (committed with this session) before the error; a join that worked is not kept
            s.add(JoinAttempt(client=address, browser=browser, at=now(), ok=False))
    if not ok:
        raise ClassError("No open class has that code: check it on the board." if row is None
                         else "That class has closed.")
    with session() as s:
        learner = s.get(Learner, learner_id(s, token))
        learner.class_id, learner.nickname, learner.active_at = row.id, nickname(name), now()
        return _info(s, s.get(Classroom, row.id))


def leave_class(token: str) -> None:
    """The learner leaves their class (their answers stay theirs)."""
    with session() as s:
        learner = s.get(Learner, learner_id(s, token))
        learner.class_id = None
        learner.nickname = None


def class_of(token: str) -> ClassInfo | None:
    """The class the learner `token` is in, or None."""
    with session() as s:
        learner = s.scalar(select(Learner).where(Learner.token_hash == hashed(token)))
        if learner is None or learner.class_id is None:
            return None
        return _info(s, s.get(Classroom, learner.class_id))


def teacher_class(code: str, secret: str) -> ClassInfo:
    """The class `code`, for its teacher: NotTeacher unless `secret` is the one given when it opened."""
    with session() as s:
        row = s.scalar(select(Classroom).where(Classroom.code == normal_code(code)))
        if row is None or not secret or not hmac.compare_digest(row.secret_hash, hashed(secret)):
            raise NotTeacher("This link is not a teacher's link for an open class (the secret is missing or "
                             "wrong, or the class was deleted).")
        return _info(s, row)


def _names(s, class_id: int) -> dict[int, tuple[str, Learner]]:
    learners = s.scalars(select(Learner).where(Learner.class_id == class_id).order_by(Learner.created_at))
    return {row.id: (row.nickname or f"student {i + 1}", row) for i, row in enumerate(learners)}


def class_answers(teacher: ClassInfo) -> tuple[AnswerRow, ...]:
    """Every question the class's students answered, each student's first prediction, oldest first (a teacher's
    ClassInfo, from teacher_class)."""
    with session() as s:
        names = _names(s, teacher.id)
        rows = s.scalars(select(Answer).where(Answer.learner_id.in_(names)).order_by(Answer.answered_at))
        return tuple(_row(names[a.learner_id][0], a) for a in rows)


def _row(student: str, a: Answer) -> AnswerRow:
    first = a.first_choice or a.choice
    return AnswerRow(student=student, question=a.question, page=a.page, choice=first, answer=a.answer,
                     right=None if a.answer is None else first == a.answer, attempts=a.attempts or 1,
                     last_choice=a.choice, why=(a.reveal or {}).get("why", ""), answered_at=a.answered_at,
                     late=bool(a.late))


def class_students(teacher: ClassInfo) -> tuple[Student, ...]:
    """Who is in the class, where each is on the route, how many questions each answered and how many of their
    first predictions were right."""
    with session() as s:
        names = _names(s, teacher.id)
        counts = {lid: (0, 0) for lid in names}
        for a in s.scalars(select(Answer).where(Answer.learner_id.in_(names))):
            n, r = counts[a.learner_id]
            counts[a.learner_id] = (n + 1, r + bool(_row("", a).right))
        return tuple(Student(name, row.last_step, *counts[lid], row.active_at) for lid, (name, row) in names.items())


def set_reveal(teacher: ClassInfo, page: str, revealed: bool) -> None:
    """Open `page` whole for the class (its questions no longer hold it back), or close it again."""
    with session() as s:
        s.execute(delete(Reveal).where(Reveal.class_id == teacher.id, Reveal.page == page))
        if revealed:
            s.add(Reveal(class_id=teacher.id, page=page, revealed_at=now()))


def board_class(code: str) -> ClassInfo:
    """The class `code` as its board (the projector's view) reads it: no secret, for nothing on the board is secret
    (the code is written there; it shows no names). ClassError when no class has that code."""
    with session() as s:
        row = s.scalar(select(Classroom).where(Classroom.code == normal_code(code)))
        if row is None:
            raise ClassError("No class has that code (it may have been deleted).")
        return _info(s, row)


def show_question(teacher: ClassInfo, question: str | None) -> None:
    """The question the class's board shows (its key), or none (the board shows the code and the link only)."""
    with session() as s:
        s.get(Classroom, teacher.id).shown_question = question


def rotate_key(teacher: ClassInfo) -> str:
    """A new teacher's secret for the class (returned once; only its hash is kept): the old one opens nothing."""
    secret = secrets.token_urlsafe(24)
    with session() as s:
        s.get(Classroom, teacher.id).secret_hash = hashed(secret)
    return secret


def let_browsers_try_again(teacher: ClassInfo) -> int:
    """Forget the wrong codes tried in the last JOIN_WINDOW, so a browser shut out by typos can join now (its
    teacher asks for it: the limit is there against guessing, not against a student). Returns how many."""
    with session() as s:
        return s.execute(delete(JoinAttempt).where(JoinAttempt.at > now() - JOIN_WINDOW)).rowcount


def farewell(token: str) -> str | None:
    """The title of a class its teacher deleted with the learner `token` in it, once (then forgotten), or None."""
    with session() as s:
        row = s.get(Farewell, hashed(token))
        if row is None:
            return None
        s.delete(row)
        return row.title


def reopen_class(teacher: ClassInfo) -> None:
    """A closed class open again: students can join it."""
    with session() as s:
        s.get(Classroom, teacher.id).closed_at = None


def wrong_codes_lately() -> int:
    """Wrong join codes tried in the last JOIN_WINDOW (what let_browsers_try_again would forget)."""
    with session() as s:
        return s.scalar(select(func.count()).select_from(JoinAttempt).where(JoinAttempt.at > now() - JOIN_WINDOW))


def close_class(teacher: ClassInfo) -> None:
    """No one joins any more; the students' view and the data stay until deleted."""
    with session() as s:
        s.get(Classroom, teacher.id).closed_at = now()


def delete_class(teacher: ClassInfo) -> None:
    """The class and everything its students gave in it (their learner rows, answers, pages seen) deleted; each
    student is told once, on their next visit (farewell)."""
    with session() as s:
        for token_hash in list(s.scalars(select(Learner.token_hash).where(Learner.class_id == teacher.id))):
            s.merge(Farewell(token_hash=token_hash, title=teacher.title, at=now()))
        s.execute(delete(Learner).where(Learner.class_id == teacher.id))
        s.execute(delete(Classroom).where(Classroom.id == teacher.id))


def purge(at: datetime | None = None) -> int:
    """Delete what the retention no longer allows: classes past their delete_after (with their students' data),
    learners outside a class inactive for a retention, and old join attempts. Returns the classes deleted."""
    at = at or now()
    with session() as s:
        expired = list(s.scalars(select(Classroom.id).where(Classroom.delete_after <= at)))
        if expired:
            s.execute(delete(Learner).where(Learner.class_id.in_(expired)))
            s.execute(delete(Classroom).where(Classroom.id.in_(expired)))
        s.execute(delete(Learner).where(Learner.class_id.is_(None), Learner.active_at <= at - retention()))
        s.execute(delete(JoinAttempt).where(JoinAttempt.at <= at - JOIN_WINDOW))
        s.execute(delete(Farewell).where(Farewell.at <= at - retention()))
    return len(expired)
