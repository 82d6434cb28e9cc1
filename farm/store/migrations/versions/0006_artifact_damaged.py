"""artifacts.damaged: an artifact whose stored bytes `farm db check --repair` found lost

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 11:30:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('damaged', sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.drop_column('damaged')
