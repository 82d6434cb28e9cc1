"""runs.series / config / jax_version / exported_on / schedule / slot: run dimensions as columns

Until this revision a run's configuration, jax version, exported-on version and schedule
slot were written into its name (``NAME@x64=on``, ``NAME@jax=V``, ``NAME@xver=A>B``,
``SWEEP-YYYYMMDDTHHMMZ``) and parsed back. This migration parses the names of existing runs
once, into columns; from here on a name is a label and nothing parses it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 11:30:00
"""
import re

from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

COLUMNS = (("series", 200), ("config", 200), ("jax_version", 32), ("exported_on", 32), ("schedule", 100),
           ("slot", 16))
SLOT = re.compile(r"(?P<schedule>[A-Za-z][A-Za-z0-9_.-]*)-(?P<slot>\d{8}T\d{4}Z)")


def dims_of(name: str) -> dict:
    """The dimensions the old naming scheme wrote into ``name`` (only this migration reads them)."""
    out: dict = {}
    base, _, tail = name.partition("@")
    if tail:
        out["series"] = base
        if tail.startswith("jax="):
            out["jax_version"] = tail[4:]
        elif tail.startswith("xver=") and ">" in tail:
            out["exported_on"], out["jax_version"] = tail[5:].split(">", 1)
        else:
            out["config"] = tail
    m = SLOT.fullmatch(base)
    if m:
        out.update(schedule=m["schedule"], slot=m["slot"])
    return out


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        for col, size in COLUMNS:
            batch_op.add_column(sa.Column(col, sa.String(length=size), nullable=True))
        batch_op.create_index('ix_runs_series', ['series'], unique=False)
        batch_op.create_index('ix_runs_schedule', ['schedule'], unique=False)
    runs = sa.table('runs', sa.column('id', sa.Integer), sa.column('name', sa.String),
                    *(sa.column(c, sa.String) for c, _ in COLUMNS))
    conn = op.get_bind()
    for run_id, name in conn.execute(sa.select(runs.c.id, runs.c.name)).all():
        dims = dims_of(name)
        if dims:
            conn.execute(runs.update().where(runs.c.id == run_id).values(**dims))


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_schedule')
        batch_op.drop_index('ix_runs_series')
        for col, _ in reversed(COLUMNS):
            batch_op.drop_column(col)
