"""0.1.0's place of image_from_binary, now ktest.backends.kind.binary_image.image_from_binary.

Still importable from here, with a DeprecationWarning (ktest.public_api.MOVED; CHANGELOG.md)."""

from ktest.lazy import moved_attributes

__getattr__ = moved_attributes(__name__, globals())
