"""harness_outcomes.result_key / downstream_key: the content-addressed result cache

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 08:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('harness_outcomes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('result_key', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('downstream_key', sa.String(length=64), nullable=True))
        batch_op.create_index('ix_harness_outcomes_result_key', ['result_key'], unique=False)
        batch_op.create_index('ix_harness_outcomes_harness_downstream', ['harness_id', 'downstream_key'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('harness_outcomes', schema=None) as batch_op:
        batch_op.drop_index('ix_harness_outcomes_harness_downstream')
        batch_op.drop_index('ix_harness_outcomes_result_key')
        batch_op.drop_column('downstream_key')
        batch_op.drop_column('result_key')
