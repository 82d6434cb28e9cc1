"""Lowering Farm: sweep JAX's primitives through trace, lower, cross-lower, export,
compile, execute and compare, on many platforms, and keep what changed.

The package follows the data flow (docs/architecture.md): catalog → pipeline (stages)
→ run → store → analysis → faces (cli/commands, dashboards), with the results contract
(``farm.results``) as the vocabulary every part shares.
"""
