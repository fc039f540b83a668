"""Run as a script by the hardening tests: a ktest session in its own process.

    python child_session.py session exit|hold   # open_session() (KTEST_BACKEND), use the cluster
    python child_session.py share-owner         # a ClusterServer (xdist-style socket directory)
    python child_session.py webhooks            # + a webhook set and an in-process operator (its log)
    python child_session.py namespace           # open_session() and a test namespace in it (its name)

Prints ``ready`` once everything is in use; with ``hold`` it then waits to be killed.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def _hold() -> None:
    while True:  # waits for the test's signal
        time.sleep(0.05)


def session(ending: str) -> None:
    from kubernetes.client.exceptions import ApiException

    from ktest.backends import open_session
    from ktest.config import settings_from_env

    with open_session(settings_from_env()) as backend:
        cluster = backend.cluster
        cluster.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
        )
        if backend.name == "bare":
            user = cluster.user("someone", groups=["team"])
            try:
                user.get(("v1", "ConfigMap", "c", "default"))
            except ApiException as error:  # forbidden: what matters is that its credentials were used
                assert error.status == 403, error
        print("ready", flush=True)
        if ending == "hold":
            _hold()
        sys.stdin.readline()  # "exit": leave the session (a clean close) when the test says so


def _idle_operator(context: Any) -> None:
    context.ready()
    context.stop.wait()


def webhooks_and_operator() -> None:
    """A bare session holding a started webhook set (a serving key in $TMPDIR) and a running
    in-process operator (its log directory in $TMPDIR); prints both directories."""
    from ktest.backends import open_session
    from ktest.config import settings_from_env
    from ktest.operators import run_callable
    from ktest.webhooks import Handlers, Webhooks

    handlers = Handlers()

    @handlers.validate("", "v1", "configmaps")
    def allow(request: object) -> None:
        return None

    with open_session(settings_from_env()) as backend:
        cluster = backend.cluster
        webhooks = Webhooks(cluster, handlers=handlers).start()
        operator = run_callable(_idle_operator, cluster, name="held")
        print(f"ready {webhooks.cert_dir.parent} {operator.log.path.parent}", flush=True)
        _hold()


def namespace_holder() -> None:
    """A session holding a test namespace, as a test using the ``namespace`` fixture does."""
    from ktest.backends import open_session
    from ktest.config import settings_from_env

    with open_session(settings_from_env()) as backend, backend.cluster.namespace(prefix="held") as name:
        print(f"ready {name}", flush=True)
        _hold()


def share_owner() -> None:
    from ktest.sessions.shared import ClusterServer

    server = ClusterServer(lambda: None)  # type: ignore[arg-type,return-value]
    print(f"ready {server.address}", flush=True)
    _hold()


if __name__ == "__main__":
    if sys.argv[1] == "session":
        session(sys.argv[2])
    elif sys.argv[1] == "webhooks":
        webhooks_and_operator()
    elif sys.argv[1] == "namespace":
        namespace_holder()
    else:
        share_owner()
