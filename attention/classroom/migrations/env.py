"""Alembic's environment: migrations run on the connection attention.classroom.database.migrate hands over (or,
from the alembic command line, on $ATTENTION_EXPLORER_DATABASE_URL), against the tables in schema.py."""

from alembic import context
from sqlalchemy import create_engine

from attention.classroom.database import database_url
from attention.classroom.schema import Base

target_metadata = Base.metadata


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite")  # SQLite alters a table by copying it
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    with create_engine(database_url()).begin() as fresh:
        _run(fresh)
