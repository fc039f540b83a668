"""ktest pytest plugin (being written)."""
