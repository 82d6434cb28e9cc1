"""The results store: SQLAlchemy models, migrations, artifacts, writes and queries."""
from farm.store.db import Store, open_store

__all__ = ["Store", "open_store"]
