"""``farm bisect``: since which jax release, and which jax commit, is a harness bad.

Imports run one way (an import-linter contract keeps them so): ``driver`` (the lines of
points and the search driver) > ``releases`` (released versions as points) > ``steps`` (one
step in its own process, through a content-keyed step cache; the ``Point`` a line is made
of) and ``history`` (the stored runs) > ``jaxgit`` (a jax checkout). What "bad" means and
the search itself are pure, in ``farm.analysis.bisection``.
"""
