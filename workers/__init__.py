"""Worker processes: Ray actors per slot, and a standalone mode without Ray."""
