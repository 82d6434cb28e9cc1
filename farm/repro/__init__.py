"""Standalone reproducers and a minimizer for the farm's failures (``farm repro``).

``reproduce`` runs a harness as a sweep does (isolated worker), picks its failure and
writes a directory whose ``repro.py`` needs only jax, jaxlib and numpy; with
``do_minimize`` it delta-debugs the program (``minimize``) in isolated workers
(``candidate``) and writes the minimized script beside the full one.
"""
from farm.repro.reproduce import Report, reproduce

__all__ = ["Report", "reproduce"]
