"""0.1.0's place of a public name that moved: the run context is ktest.run_context.

Still importable from here, with a DeprecationWarning (ktest.public_api.MOVED; CHANGELOG.md)."""

from ktest.lazy import moved_attributes

__getattr__ = moved_attributes(__name__, globals())
