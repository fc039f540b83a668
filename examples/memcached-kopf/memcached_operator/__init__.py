"""A small memcached operator written with kopf (see handlers.py)."""
