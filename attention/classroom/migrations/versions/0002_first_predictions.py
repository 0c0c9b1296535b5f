"""A class keeps each student's first prediction (asking a question again no longer rewrites it); the join limit
counts by browser as well as by address, an address salted.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("answers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("first_choice", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("attempts", sa.Integer(), server_default="1", nullable=False))
        batch_op.add_column(sa.Column("withdrawn", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.execute("UPDATE answers SET first_choice = choice")
    with op.batch_alter_table("join_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("browser", sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f("ix_join_attempts_browser"), ["browser"], unique=False)
    op.create_table("install",
                    sa.Column("id", sa.Integer(), nullable=False),
                    sa.Column("salt", sa.String(length=64), nullable=False),
                    sa.PrimaryKeyConstraint("id"))


def downgrade() -> None:
    op.drop_table("install")
    with op.batch_alter_table("join_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_join_attempts_browser"))
        batch_op.drop_column("browser")
    with op.batch_alter_table("answers", schema=None) as batch_op:
        batch_op.drop_column("withdrawn")
        batch_op.drop_column("attempts")
        batch_op.drop_column("first_choice")
