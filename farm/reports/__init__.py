"""Reports over the store's rows: the store returns plain rows (``farm.store``), the
analysis computes from them (``farm.analysis``, pure), and this package puts the two
together for the faces (``farm compare``, ``farm triage``, the end of ``farm sweep``,
the dashboard's compare and failures pages).

- ``comparison``: the comparison report of two runs, kept in the store's ``reports``
  table while it is current (``comparison``, ``precompute``, ``Settings``);
- ``triage``: failure clusters of a run with their history and acknowledgements
  (``triage``, ``acknowledge``, ``sweep_lines``).
"""
