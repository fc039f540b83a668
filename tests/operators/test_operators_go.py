"""The Go controller-runtime manager of fixtures/go-manager, run as a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from builders import configmap, configmap_ref
from operator_helpers import GO_MANAGER

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import operator_identity, run_subprocess
from ktest.wait import eventually

PROBE = ["--health-probe-bind-address=127.0.0.1:{port}"]
READYZ = "http://127.0.0.1:{port}/readyz"
ROLE = GO_MANAGER / "config" / "rbac" / "role.yaml"
LABELS = {"ktest.dev/mirror": "true"}


def mirrored(admin: Cluster, ns: str, name: str, data: dict[str, str]) -> None:
    copy = admin.get(configmap_ref(f"{name}-mirror", ns))
    assert copy["data"] == data
    owner = copy["metadata"]["ownerReferences"][0]
    assert owner["name"] == name and owner["controller"] is True


def test_go_manager_becomes_ready_via_readyz_and_reconciles(
    admin: Cluster, ns: str, go_manager: Path
) -> None:
    with run_subprocess([go_manager], admin, args=PROBE, ready_http=READYZ) as op:
        admin.create(configmap("a", ns, {"k": "v"}, labels=LABELS))
        eventually(lambda: mirrored(admin, ns, "a", {"k": "v"}))
        admin.patch(configmap_ref("a", ns), {"data": {"k": "v2"}})
        eventually(lambda: mirrored(admin, ns, "a", {"k": "v2"}))
        admin.delete(configmap_ref("a", ns))  # the garbage collector removes the owned mirror
        eventually(lambda: admin.get_or_none(configmap_ref("a-mirror", ns)) is None)
    assert op.returncode == 0  # controller-runtime shuts down cleanly on SIGTERM
    assert "watching configmaps" in op.logs


def test_go_manager_crash_then_restart_converges(admin: Cluster, ns: str, go_manager: Path) -> None:
    with run_subprocess([go_manager], admin, args=PROBE, ready_http=READYZ) as op:
        port = op.port
        op.crash()
        admin.create(configmap("late", ns, {"x": "1"}, labels=LABELS))
        op.restart()
        assert op.port == port
        eventually(lambda: mirrored(admin, ns, "late", {"x": "1"}))


def test_go_manager_least_privilege(admin: Cluster, ns: str, go_manager: Path) -> None:
    with (
        operator_identity(admin, ROLE, user="go-mirror") as identity,
        run_subprocess([go_manager], identity.cluster, args=PROBE, ready_http=READYZ),
    ):
        admin.create(configmap("a", ns, {"k": "v"}, labels=LABELS))
        eventually(lambda: mirrored(admin, ns, "a", {"k": "v"}))


def without_verb(verb: str) -> dict:
    role = yaml.safe_load(ROLE.read_text())
    role["rules"][0]["verbs"].remove(verb)
    return role


def test_go_manager_denied_create_says_which_verb(admin: Cluster, ns: str, go_manager: Path) -> None:
    with operator_identity(admin, without_verb("create"), user="go-no-create") as identity:
        op = run_subprocess([go_manager], identity.cluster, args=PROBE, ready_http=READYZ)
        admin.create(configmap("a", ns, labels=LABELS))
        with pytest.raises(OperatorError) as raised:
            eventually(lambda: mirrored(admin, ns, "a", {}), timeout=60)
        op.close()
    message = str(raised.value)
    assert 'was refused by RBAC: user "go-no-create" may not create configmaps (core API group)' in message
    assert f'in namespace "{ns}"' in message
    assert 'verbs: ["create"]' in message  # the rule to add


def test_go_manager_denied_watch_is_not_ready_and_says_which_verb(
    admin: Cluster, ns: str, go_manager: Path
) -> None:
    # The informer's first LIST is allowed, so /readyz may turn green before the WATCH is
    # refused: the denial fails either the readiness wait or the next check, never silently.
    with (
        operator_identity(admin, without_verb("watch"), user="go-no-watch") as identity,
        pytest.raises(OperatorError) as raised,
        run_subprocess([go_manager], identity.cluster, args=PROBE, ready_http=READYZ),
    ):
        eventually(lambda: False, timeout=30)
    message = str(raised.value)
    assert 'user "go-no-watch" may not watch configmaps' in message
    assert "at cluster scope" in message
