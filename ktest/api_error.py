"""0.1.0's place of a public name that moved: ApiError is ktest.errors.api.ApiError.

Still importable from here, with a DeprecationWarning (ktest.public_api.MOVED; CHANGELOG.md)."""

from ktest.lazy import moved_attributes

__getattr__ = moved_attributes(__name__, globals())
