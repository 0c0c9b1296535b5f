"""Where a classroom's data lives, and the one way in: an engine for the operator's database, its schema brought
up to date by the migrations (Alembic) before first use.

SQLite in a data folder is the default (one file; WAL, so the several app processes of `make class` read while one
writes); a PostgreSQL URL serves a class spread over machines. The operator chooses with the environment:

    ATTENTION_EXPLORER_DATABASE_URL   postgresql+psycopg://user@host/db   (default: SQLite in the data folder)
    ATTENTION_EXPLORER_DATA           the data folder (default: $XDG_DATA_HOME/attention-explorer)

    engine = database()          # one per process and URL, migrated
    with session(engine) as s: ...   # a transaction: committed on leaving, rolled back on an error
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_FILE = "classroom.sqlite3"
BUSY_MS = 10_000  # how long a SQLite writer waits for another process's write before giving up


def data_dir() -> Path:
    """The folder the embedded database is kept in: $ATTENTION_EXPLORER_DATA, else $XDG_DATA_HOME/attention-explorer
    (~/.local/share/attention-explorer)."""
    env = os.environ.get("ATTENTION_EXPLORER_DATA")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "attention-explorer"


def database_url() -> str:
    """$ATTENTION_EXPLORER_DATABASE_URL, else a SQLite file in data_dir()."""
    return os.environ.get("ATTENTION_EXPLORER_DATABASE_URL") or f"sqlite:///{data_dir() / SQLITE_FILE}"


def database(url: str | None = None) -> Engine:
    """The engine for `url` (default database_url()), its schema migrated to the newest revision: one per process
    and URL."""
    return _engine(url or database_url())


@cache
def _engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": BUSY_MS / 1000})
        event.listen(engine, "connect", _sqlite_settings)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    migrate(engine)
    return engine


def _sqlite_settings(connection, _record) -> None:
    """Each SQLite connection: write-ahead log (readers never wait for a writer), foreign keys enforced (a class
    deleted takes its learners' answers with it), and a writer waits for another's lock instead of failing."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")  # durable at each commit in WAL mode against a process killed
    cursor.close()


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest migration (Alembic's `upgrade head`), one process at a time: the app
    processes of `make class` start together."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with _migration_lock(engine), engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """A lock across processes while migrating: a lock file beside a SQLite database, PostgreSQL's advisory lock."""
    if engine.dialect.name == "sqlite":
        database_file = engine.url.database
        if not database_file or database_file == ":memory:":
            yield
            return
        with open(f"{database_file}.migrating", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return
    key = int.from_bytes(hashlib.sha256(b"attention-explorer migrations").digest()[:4], "big")
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
            connection.commit()


@contextmanager
def session(engine: Engine | None = None) -> Iterator[Session]:
    """A unit of work on `engine` (default database()): committed when the block ends, rolled back on an error;
    what it wrote is on disk before the block returns."""
    with Session(engine or database(), expire_on_commit=False) as s, s.begin():
        yield s
