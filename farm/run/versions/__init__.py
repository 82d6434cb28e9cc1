"""JAX versions as a sweep dimension: ``venvs`` (a provisioned virtual environment per jax
version, and the standalone worker run in it) and ``matrix`` (the version sweep and the
cross-version export matrix, and their runs in the store).
"""
