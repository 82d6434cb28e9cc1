"""code_deps table; stored_outcomes.deps_sha / deps_key: the per-harness key on jax's code

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 16:30:00
"""
import importlib.util
from pathlib import Path

from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

OUTCOME_COLS_0010 = ("harness_id", "environment_id", "worst", "seconds", "worker", "cached_from", "result_key",
                     "downstream_key", "deps_sha", "deps_key")


def _delta():
    spec = importlib.util.spec_from_file_location("_delta_runs_0008", Path(__file__).with_name("0008_delta_runs.py"))
    delta = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(delta)
    return delta


def upgrade() -> None:
    op.create_table('code_deps',
                    sa.Column('sha256', sa.String(length=64), nullable=False),
                    sa.Column('body', sa.LargeBinary(), nullable=False),
                    sa.PrimaryKeyConstraint('sha256', name=op.f('pk_code_deps')))
    # ADD COLUMN keeps the table on SQLite too (no batch copy); the view lists its columns, so it is made again
    op.execute('DROP VIEW harness_outcomes')
    op.add_column('stored_outcomes', sa.Column('deps_sha', sa.String(length=64), nullable=True))
    op.add_column('stored_outcomes', sa.Column('deps_key', sa.String(length=64), nullable=True))
    op.execute(_delta().view_sql('harness_outcomes', 'stored_outcomes', OUTCOME_COLS_0010))


def downgrade() -> None:
    delta = _delta()
    op.execute('DROP VIEW harness_outcomes')
    op.execute('DROP VIEW results')  # it names stored_outcomes, which SQLite's batch mode rebuilds
    with op.batch_alter_table('stored_outcomes', schema=None) as batch_op:
        batch_op.drop_column('deps_key')
        batch_op.drop_column('deps_sha')
    op.execute(delta.view_sql('results', 'stored_results', delta.RESULT_COLS))
    op.execute(delta.view_sql('harness_outcomes', 'stored_outcomes', delta.OUTCOME_COLS))
    op.drop_table('code_deps')
