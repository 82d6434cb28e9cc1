"""The farm's file formats, in one place: what crosses a process or a host as bytes.

- ``iofile``: a harness's inputs and outputs as one ``.npz`` (the ``io`` artifact);
- ``bundles``: a run's results as a gzipped JSON bundle (a standalone worker's output,
  ``farm export``/``farm import``), inflated in bounded chunks;
- ``bundle_schema``: the JSON Schema a bundle or journal must pass before anything of it
  is trusted;
- ``journal``: a standalone worker's append-only, fsynced results journal.

They import only the contract (``farm.results``, ``farm.errors``) and NumPy: a device host
with jax alone reads and writes them.
"""
