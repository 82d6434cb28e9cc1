"""The harness catalog: one module per primitive family, define() calls only."""
