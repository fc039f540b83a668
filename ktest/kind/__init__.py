"""0.1.0's kind modules: kind is ``ktest.backends.kind`` now. Only the public names' old places
remain here (``handle``, ``binary_image``), importable with a DeprecationWarning."""
