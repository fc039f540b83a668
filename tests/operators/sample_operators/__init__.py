"""Small operators written for ktest's own operator tests (importable as ``sample_operators``)."""
