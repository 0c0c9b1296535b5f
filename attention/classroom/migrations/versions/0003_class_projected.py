"""A class the teacher can project: the question the board shows, when a page was opened for the class, and
whether an answer was given after its page was opened (a late answer, counted apart).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("classes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("shown_question", sa.String(length=64), nullable=True))
    with op.batch_alter_table("class_reveals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revealed_at", sa.DateTime(), nullable=True))
    with op.batch_alter_table("answers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("late", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("answers", schema=None) as batch_op:
        batch_op.drop_column("late")
    with op.batch_alter_table("class_reveals", schema=None) as batch_op:
        batch_op.drop_column("revealed_at")
    with op.batch_alter_table("classes", schema=None) as batch_op:
        batch_op.drop_column("shown_question")
