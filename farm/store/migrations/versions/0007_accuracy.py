"""accuracy: measured ULP tables per jax/jaxlib version (``farm accuracy``)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 11:20:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'accuracy',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('jax_version', sa.String(length=32), nullable=False),
        sa.Column('jaxlib_version', sa.String(length=32), nullable=False),
        sa.Column('primitive', sa.String(length=64), nullable=False),
        sa.Column('dtype', sa.String(length=16), nullable=False),
        sa.Column('platform', sa.String(length=16), nullable=False),
        sa.Column('reference_key', sa.String(length=64), nullable=False),
        sa.Column('n', sa.Integer(), nullable=False),
        sa.Column('max_ulp', sa.Double(), nullable=True),
        sa.Column('max_ulp_normal', sa.Double(), nullable=True),
        sa.Column('distribution', sa.JSON(), nullable=False),
        sa.Column('worst', sa.JSON(), nullable=False),
        sa.Column('special', sa.JSON(), nullable=False),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('seconds', sa.Double(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.CheckConstraint('n >= 0', name=op.f('ck_accuracy_n')),
        sa.CheckConstraint('seconds >= 0', name=op.f('ck_accuracy_seconds')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_accuracy')),
        sa.UniqueConstraint('jax_version', 'jaxlib_version', 'primitive', 'dtype', 'platform',
                            name='uq_accuracy_natural'),
    )
    op.create_index(op.f('ix_accuracy_jax_version'), 'accuracy', ['jax_version'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_accuracy_jax_version'), table_name='accuracy')
    op.drop_table('accuracy')
