"""run_kopf(..., liveness=True) serves kopf's liveness endpoint (`kopf run --liveness`) on a free
loopback port; op.probe() returns the @kopf.on.probe handlers' answer."""

from __future__ import annotations

import pytest
from operator_helpers import SAMPLES

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import run_kopf

PROBES = SAMPLES / "kopf_probes.py"


def test_probe_returns_the_probe_handlers_answer(admin: Cluster, ns: str) -> None:
    with run_kopf(PROBES, admin, namespaces=[ns], liveness=True, memo={"region": "eu-west-1"}) as op:
        assert op.liveness_url is not None and op.liveness_url.startswith("http://127.0.0.1:")
        assert op.probe() == {"backend": {"reachable": True, "region": "eu-west-1"}, "version": "1.2.3"}
        url = op.liveness_url
        op.restart()
        assert op.liveness_url == url  # the same address for every run
        assert op.probe()["version"] == "1.2.3"
    with pytest.raises(OperatorError, match="is closed and not running"):
        op.probe()


def test_probe_misuse_says_how_to_fix_it(admin: Cluster, ns: str) -> None:
    endpoint = "http://0.0.0.0:8080/healthz"  # kopf run --liveness's argument
    with pytest.raises(OperatorError, match=f"liveness='{endpoint}' is not supported; pass liveness=True"):
        run_kopf(PROBES, admin, namespaces=[ns], liveness=endpoint)  # type: ignore[arg-type]
    no_endpoint = r"serves no liveness endpoint: start it with run_kopf\(\.\.\., liveness=True\)"
    with run_kopf(PROBES, admin, namespaces=[ns]) as op, pytest.raises(OperatorError, match=no_endpoint):
        op.probe()
