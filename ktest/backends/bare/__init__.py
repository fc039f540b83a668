"""Backend ``bare``: an embedded control plane (etcd + kube-apiserver + kube-controller-manager).

``registration`` is its ``BackendSpec``;
``backend`` starts one for a session (:class:`~ktest.backends.bare.backend.BareBackend`);
``reuse`` keeps the records of warm ones (``ktest up``) and attaches to them; ``daemon`` is the
background process behind ``ktest up``; ``cli`` is bare's part of ``ktest up | status | down``.
This package imports nothing itself: the ``ktest`` command loads ``cli`` to build its parser.
"""
