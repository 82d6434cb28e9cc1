"""``farm bench``: the performance suite (suite.py) and the benchmark database generator (db.py)."""
