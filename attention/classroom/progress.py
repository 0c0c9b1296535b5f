"""A learner's progress, kept in the database against an anonymous id: the pages they opened, the answers they
gave, the pages they opened whole, and their last step on the path. A reload, a new tab or a return next day reads
the same; each write is committed before it returns, so an answer acknowledged on screen is on disk.

The id is a random token the browser keeps (pages/_learner.py sets it); the database holds only its sha256.

    token = new_token()
    record_answer(token, "lookup.winner", "lookup", "cherry", reveal={...}, answer="cherry")
    progress_of(token).answers["lookup.winner"].choice      # "cherry"
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from attention.classroom.database import session
from attention.classroom.schema import Answer, Learner, Reveal, Seen, Skipped


def now() -> datetime:
    """The time as the database keeps it: UTC, without a zone."""
    return datetime.now(UTC).replace(tzinfo=None)


def new_token() -> str:
    """A learner's anonymous id: 32 random bytes, URL-safe (nothing about the person)."""
    return secrets.token_urlsafe(32)


def hashed(secret: str) -> str:
    """What the database keeps of a learner's id or a teacher's secret: its sha256, hex (both are random, so a
    plain hash cannot be reversed by guessing)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class StoredAnswer:
    """An answer as kept: the choice and, once judged, the reveal it was judged against (as JSON)."""

    choice: str
    reveal: dict | None = None


@dataclass(frozen=True)
class Progress:
    """Everything kept about one learner."""

    seen: frozenset[str] = frozenset()  # pages opened, by URL name
    skipped: frozenset[str] = frozenset()  # pages opened whole before their questions were answered
    answers: dict[str, StoredAnswer] = field(default_factory=dict)  # question key -> answer
    last_step: str | None = None  # the path's page opened last, by URL name
    class_id: int | None = None  # the class joined, if any
    nickname: str | None = None


def learner_id(s: Session, token: str) -> int:
    """The learner row for `token`, made on first use (two tabs making it at once: one wins, both read it)."""
    key = hashed(token)
    found = s.scalar(select(Learner.id).where(Learner.token_hash == key))
    if found is not None:
        return found
    try:
        with s.begin_nested():
            row = Learner(token_hash=key, created_at=now(), active_at=now())
            s.add(row)
        return row.id
    except IntegrityError:
        return s.scalar(select(Learner.id).where(Learner.token_hash == key))


def progress_of(token: str) -> Progress:
    """What is kept for `token` (an empty Progress for a browser never seen)."""
    with session() as s:
        row = s.scalar(select(Learner).where(Learner.token_hash == hashed(token)))
        if row is None:
            return Progress()
        seen = frozenset(s.scalars(select(Seen.page).where(Seen.learner_id == row.id)))
        skipped = frozenset(s.scalars(select(Skipped.page).where(Skipped.learner_id == row.id)))
        answers = {a.question: StoredAnswer(a.choice, a.reveal)
                   for a in s.scalars(select(Answer).where(Answer.learner_id == row.id, Answer.withdrawn.is_(False)))}
        return Progress(seen, skipped, answers, row.last_step, row.class_id, row.nickname)


def mark_seen(token: str, page: str, *, step: bool = False) -> None:
    """`page` (URL name) opened; with `step`, it is also the learner's place on the path."""
    with session() as s:
        lid = learner_id(s, token)
        if s.get(Seen, (lid, page)) is None:
            s.add(Seen(learner_id=lid, page=page))
        learner = s.get(Learner, lid)
        learner.active_at = now()
        if step:
            learner.last_step = page


def mark_skipped(token: str, page: str) -> None:
    """`page` opened whole before its questions were answered."""
    with session() as s:
        lid = learner_id(s, token)
        if s.get(Skipped, (lid, page)) is None:
            s.add(Skipped(learner_id=lid, page=page))


def record_answer(token: str, question: str, page: str, choice: str, *, reveal: dict | None = None,
                  answer: str | None = None) -> None:
    """The learner's choice for `question` (on `page`), and once judged the answer and the reveal (JSON). A question
    asked again and answered anew counts one more attempt; its first choice stays as it was, and so does whether
    it was late: given after the page was opened whole, by the learner or for their class (`opened_whole`)."""
    with session() as s:
        lid = learner_id(s, token)
        row = s.get(Answer, (lid, question))
        if row is None:
            row = Answer(learner_id=lid, question=question, first_choice=choice, attempts=1, withdrawn=False,
                         late=opened_whole(s, lid, page))
        elif row.withdrawn:  # answered again after "Ask me again"
            row.attempts, row.withdrawn = row.attempts + 1, False
        row.page, row.choice, row.reveal, row.answer = page, choice, reveal, answer
        row.right = None if answer is None else choice == answer
        row.answered_at = now()
        s.add(row)
        s.get(Learner, lid).active_at = now()


def opened_whole(s: Session, lid: int, page: str) -> bool:
    """Whether the learner `lid` can see `page` whole now, its answers on screen: they pressed "Show the rest of
    the page" (Skipped), or the teacher of their class opened it for the class (Reveal)."""
    if s.get(Skipped, (lid, page)) is not None:
        return True
    class_id = s.scalar(select(Learner.class_id).where(Learner.id == lid))
    return class_id is not None and s.get(Reveal, (class_id, page)) is not None


def forget_answer(token: str, question: str, page: str | None = None) -> None:
    """A question asked again: its answer no longer the learner's (withdrawn: the first prediction is kept for
    their class), and with `page`, that page no longer skipped."""
    with session() as s:
        lid = learner_id(s, token)
        row = s.get(Answer, (lid, question))
        if row is not None:
            row.withdrawn = True
        if page is not None:
            s.execute(delete(Skipped).where(Skipped.learner_id == lid, Skipped.page == page))


def forget_learner(token: str) -> None:
    """Everything kept about `token` deleted (the learner asked to start afresh)."""
    with session() as s:
        s.execute(delete(Learner).where(Learner.token_hash == hashed(token)))
