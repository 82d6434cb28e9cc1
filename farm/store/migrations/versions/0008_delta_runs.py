"""delta runs: runs.base_run_id; results and harness_outcomes become views over stored rows

A delta run stores the outcome and result rows of only the harnesses whose rows differ
from its base run's, and shares the base's rows for the rest (``farm.store.deltas``). The
tables are renamed ``stored_results`` and ``stored_outcomes`` (written), and the old names
become views (read) that resolve every run's effective rows, so every query, page,
export and comparison reads a delta run as if it were fully stored.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 14:10:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

RESULT_COLS = ("harness_id", "platform", "stage", "status", "seconds", "error_type", "error", "detail", "metrics",
               "facts", "artifact_sha", "comparable")
OUTCOME_COLS = ("harness_id", "environment_id", "worst", "seconds", "worker", "cached_from", "result_key",
                "downstream_key")


def view_sql(view: str, table: str, cols: tuple[str, ...]) -> str:
    """A run's stored rows, plus its base run's rows of every harness it stored no outcome for."""
    own = ", ".join(f"s.{c}" for c in cols)
    inherited = ", ".join(f"b.{c}" for c in cols)
    return (f"CREATE VIEW {view} AS "
            f"SELECT s.id, s.run_id, {own} FROM {table} s "
            f"UNION ALL "
            f"SELECT b.id, d.id AS run_id, {inherited} FROM runs d JOIN {table} b ON b.run_id = d.base_run_id "
            f"WHERE d.base_run_id IS NOT NULL AND NOT EXISTS "
            f"(SELECT 1 FROM stored_outcomes o WHERE o.run_id = d.id AND o.harness_id = b.harness_id)")


def upgrade() -> None:
    op.rename_table('results', 'stored_results')
    op.rename_table('harness_outcomes', 'stored_outcomes')
    if op.get_bind().dialect.name == 'sqlite':
        # ADD COLUMN keeps the table (a batch copy of runs would cascade its DROP to every result)
        op.execute('ALTER TABLE runs ADD COLUMN base_run_id INTEGER '
                   'CONSTRAINT fk_runs_base_run_id_runs REFERENCES runs (id)')
    else:
        op.add_column('runs', sa.Column('base_run_id', sa.Integer(), nullable=True))
        op.create_foreign_key('fk_runs_base_run_id_runs', 'runs', 'runs', ['base_run_id'], ['id'])
    op.create_index('ix_runs_base_run_id', 'runs', ['base_run_id'], unique=False)
    op.execute(view_sql('results', 'stored_results', RESULT_COLS))
    op.execute(view_sql('harness_outcomes', 'stored_outcomes', OUTCOME_COLS))


def downgrade() -> None:
    """Materializes nothing: refuses while a delta run exists (``farm db prune`` or materialize first)."""
    n = op.get_bind().execute(sa.text('SELECT count(*) FROM runs WHERE base_run_id IS NOT NULL')).scalar()
    if n:
        raise RuntimeError(f'{n} delta runs: materialize them before downgrading below 0008')
    op.execute('DROP VIEW harness_outcomes')
    op.execute('DROP VIEW results')
    op.drop_index('ix_runs_base_run_id', table_name='runs')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('base_run_id')
    op.rename_table('stored_outcomes', 'harness_outcomes')
    op.rename_table('stored_results', 'results')
