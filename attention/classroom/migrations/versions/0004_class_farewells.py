"""A word for the students of a class its teacher deleted: their progress in it goes with it, and their next visit
says so once (class_farewells).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("class_farewells",
                    sa.Column("token_hash", sa.String(length=64), nullable=False),
                    sa.Column("title", sa.String(length=80), nullable=False),
                    sa.Column("at", sa.DateTime(), nullable=False),
                    sa.PrimaryKeyConstraint("token_hash"))


def downgrade() -> None:
    op.drop_table("class_farewells")
