"""What a classroom keeps, as tables (SQLAlchemy 2 declarative): anonymous learners, the pages each saw and the
answers each gave, classes and their reveals, and join attempts (for the rate limit). Nothing personal: a learner
is a hash of a random id kept in their browser, and a nickname they may give a class.

Times are UTC, without a zone (the same in SQLite and PostgreSQL). The schema is made and changed only by the
migrations in attention/classroom/migrations (Alembic); these classes are how the code reads and writes it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String, false
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NICKNAME_CHARS = 24  # the longest nickname kept (longer ones are cut)
PAGE_CHARS = 64  # a page's URL name ("lookup") or a question's key ("lookup.winner")
CHOICE_CHARS = 200  # a question's choice as shown ("␣Paris", "it approaches 1")


class Base(DeclarativeBase):
    pass


class Classroom(Base):
    """A class a teacher opened: its join code, the hash of the teacher's secret, its route and its life."""

    __tablename__ = "classes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(12), unique=True, index=True)  # what students type ("K7QM2P")
    secret_hash: Mapped[str] = mapped_column(String(64))  # sha256 of the teacher's secret (shown once, never kept)
    title: Mapped[str] = mapped_column(String(80))
    route: Mapped[list] = mapped_column(JSON)  # the pages students follow, in order, by URL name
    opened_at: Mapped[datetime] = mapped_column(DateTime())
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    delete_after: Mapped[datetime] = mapped_column(DateTime())  # the operator's retention
    shown_question: Mapped[str | None] = mapped_column(String(PAGE_CHARS), nullable=True)  # on the board, by key


class Reveal(Base):
    """A page the teacher opened whole for the class: its questions no longer hold it back."""

    __tablename__ = "class_reveals"
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"), primary_key=True)
    page: Mapped[str] = mapped_column(String(PAGE_CHARS), primary_key=True)
    revealed_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)


class Learner(Base):
    """One browser: the sha256 of the random id it keeps in a cookie, and the class it joined (if any)."""

    __tablename__ = "learners"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    class_id: Mapped[int | None] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"), nullable=True,
                                                 index=True)
    nickname: Mapped[str | None] = mapped_column(String(NICKNAME_CHARS), nullable=True)
    last_step: Mapped[str | None] = mapped_column(String(PAGE_CHARS), nullable=True)  # URL name of the path's page
    created_at: Mapped[datetime] = mapped_column(DateTime())
    active_at: Mapped[datetime] = mapped_column(DateTime())


class Seen(Base):
    """A page a learner opened."""

    __tablename__ = "seen"
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True)
    page: Mapped[str] = mapped_column(String(PAGE_CHARS), primary_key=True)


class Skipped(Base):
    """A page a learner opened whole before answering its questions."""

    __tablename__ = "skipped"
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True)
    page: Mapped[str] = mapped_column(String(PAGE_CHARS), primary_key=True)


class Answer(Base):
    """A learner's answer to one question: the choice, and once judged the answer and the reveal it was judged
    against (attention.toy.reveal.Reveal as JSON, so a reload shows the same verdict and figures). Asked again,
    the row is withdrawn, not deleted: the first prediction (made before the answer was seen) is what a class's
    teacher reads."""

    __tablename__ = "answers"
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True)
    question: Mapped[str] = mapped_column(String(PAGE_CHARS), primary_key=True)
    page: Mapped[str] = mapped_column(String(PAGE_CHARS))
    choice: Mapped[str] = mapped_column(String(CHOICE_CHARS))
    answer: Mapped[str | None] = mapped_column(String(CHOICE_CHARS), nullable=True)
    right: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    reveal: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    answered_at: Mapped[datetime] = mapped_column(DateTime())
    first_choice: Mapped[str | None] = mapped_column(String(CHOICE_CHARS), nullable=True)  # before seeing the answer
    attempts: Mapped[int] = mapped_column(Integer, server_default="1")
    withdrawn: Mapped[bool] = mapped_column(Boolean, server_default=false())  # "Ask me again": not the learner's now
    # The first prediction was given after its page was opened whole (by the class's teacher, or by the learner's
    # "Show the rest of the page"): made with the answer on screen, a class counts it apart.
    late: Mapped[bool] = mapped_column(Boolean, server_default=false())


class Farewell(Base):
    """A class its teacher deleted, for one of its students (their id's hash): told once, on their next visit, since
    their progress in it went with it."""

    __tablename__ = "class_farewells"
    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    title: Mapped[str] = mapped_column(String(80))
    at: Mapped[datetime] = mapped_column(DateTime())


class Install(Base):
    """This installation's own random salt: an address is kept only as sha256(salt + address), which cannot be
    reversed by trying the 4e9 IPv4 addresses without the salt."""

    __tablename__ = "install"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    salt: Mapped[str] = mapped_column(String(64))


class JoinAttempt(Base):
    """A failed try at a join code, by a client (its salted hash: Install) and a browser (its id's hash): they count
    against the rate limits, and are deleted once the window has passed."""

    __tablename__ = "join_attempts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    client: Mapped[str] = mapped_column(String(64), index=True)
    browser: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    at: Mapped[datetime] = mapped_column(DateTime(), index=True)
    ok: Mapped[bool] = mapped_column(Boolean)  # always False since migration 0002: a join that worked is not kept
