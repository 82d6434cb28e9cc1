"""runs.kind: 'fuzz' (a `farm fuzz` campaign is a run of its own kind)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 14:30:00
"""
import importlib.util
from contextlib import contextmanager
from pathlib import Path

from alembic import op


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


@contextmanager
def _views_set_aside():
    """SQLite's batch mode rebuilds ``runs`` under a temporary name, which the delta-run
    views (revision 0008) refer to: they are dropped for the rebuild and made again."""
    spec = importlib.util.spec_from_file_location("_delta_runs_0008", Path(__file__).with_name("0008_delta_runs.py"))
    delta = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(delta)
    op.execute('DROP VIEW harness_outcomes')
    op.execute('DROP VIEW results')
    yield
    op.execute(delta.view_sql('results', 'stored_results', delta.RESULT_COLS))
    op.execute(delta.view_sql('harness_outcomes', 'stored_outcomes', delta.OUTCOME_COLS))


def upgrade() -> None:
    with _views_set_aside(), op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_runs_kind'), type_='check')
        batch_op.create_check_constraint(op.f('ck_runs_kind'), "kind IN ('sweep', 'replay', 'import', 'fuzz')")


def downgrade() -> None:
    op.execute("UPDATE runs SET kind = 'sweep' WHERE kind = 'fuzz'")  # still a run of results
    with _views_set_aside(), op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_runs_kind'), type_='check')
        batch_op.create_check_constraint(op.f('ck_runs_kind'), "kind IN ('sweep', 'replay', 'import')")
