"""A session's cluster, and sharing it with other processes.

What every backend hands to a test session (:class:`~ktest.sessions.backend.Backend`
and its JSON-able :class:`~ktest.sessions.backend.ClusterShare`), and how a cluster
started by one process is used by others: pytest-xdist workers ask the controller
(``shared``) and attach (``attached``); attached processes issue users from the
control plane's CA (``users``). A backend's own machinery (bare's warm ``ktest up``
records, existing's private kubeconfig) lives in its package under ``ktest.backends``.

Backends (``ktest.backends``) stand on this floor; nothing here imports a backend.
"""
