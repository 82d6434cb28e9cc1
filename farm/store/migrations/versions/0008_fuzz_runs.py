"""runs.kind: 'fuzz' (a `farm fuzz` campaign is a run of its own kind)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 14:30:00
"""
from alembic import op


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_runs_kind'), type_='check')
        batch_op.create_check_constraint(op.f('ck_runs_kind'), "kind IN ('sweep', 'replay', 'import', 'fuzz')")


def downgrade() -> None:
    op.execute("UPDATE runs SET kind = 'sweep' WHERE kind = 'fuzz'")  # still a run of results
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_runs_kind'), type_='check')
        batch_op.create_check_constraint(op.f('ck_runs_kind'), "kind IN ('sweep', 'replay', 'import')")
