"""Backend ``existing``: a cluster the user already runs, named by kubeconfig and context.

``registration`` is its ``BackendSpec``;
``backend`` checks the context and opens it (:class:`~ktest.backends.existing.backend.ExistingBackend`);
``private_kubeconfig`` writes the session's private copy of that one context; ``cli`` is its
``ktest down --backend existing``. This package imports nothing itself: the ``ktest`` command
loads ``cli`` to build its parser.
"""
