"""Scheduled sweeps: named sweep definitions in ``farm.toml``, run when their cron slot is due.

``config`` (farm.toml, cron slots), ``state`` (the state file, locks, runs in the store),
``jobs`` (Ray Jobs submission) and ``slots`` (runs the due slots and acts on regressions).
"""
