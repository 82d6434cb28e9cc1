"""acknowledgements table: known failure clusters with a note and a link (farm triage ack)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 11:10:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('acknowledgements',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('cluster', sa.String(length=12), nullable=False),
    sa.Column('note', sa.Text(), nullable=False),
    sa.Column('url', sa.String(length=1000), nullable=True),
    sa.Column('signature', sa.JSON(), nullable=False),
    sa.Column('harnesses', sa.JSON(), nullable=False),
    sa.Column('platforms', sa.JSON(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.CheckConstraint('length(cluster) = 12', name=op.f('ck_acknowledgements_cluster')),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_acknowledgements_run_id_runs'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_acknowledgements')),
    sa.UniqueConstraint('cluster', name=op.f('uq_acknowledgements_cluster'))
    )


def downgrade() -> None:
    op.drop_table('acknowledgements')
