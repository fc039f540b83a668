"""A session's cluster, and sharing it with other processes.

What every backend hands to a test session (:class:`~ktest.sessions.backend.Backend`
and its JSON-able :class:`~ktest.sessions.backend.ClusterShare`), and how a cluster
started by one process is used by others: pytest-xdist workers ask the controller
(``shared``) and attach (``attached``); a later test run attaches to a warm
``ktest up`` control plane (``reuse``); attached processes issue users from the
control plane's CA (``users``); ``existing`` gets a private copy of the user's
kubeconfig context (``private_kubeconfig``).

Backends (``ktest.backends``) stand on this floor; nothing here imports a backend.
"""
