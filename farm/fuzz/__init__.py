"""``farm fuzz``: property-based discovery beyond the catalog's fixed shapes.

- ``strategies``: hypothesis strategies per primitive family that draw valid cases;
- ``generate``: the campaign's cases, drawn deterministically from its seed;
- ``worker_catalog``: what a worker imports to know a campaign's cases (the same harnesses);
- ``known``: the farm catalog's structural limitations a case inherits;
- ``probe``: one case at a time in an isolated process (for shrinking);
- ``shrink``: hypothesis shrinking of a failure, replayed from the campaign's seed;
- ``found``, ``keep``: findings shrunk and written as ``found`` harness definitions a user can keep;
- ``campaign``: the driver (generate, sweep as a run of kind ``fuzz``, shrink, summarize).
"""
