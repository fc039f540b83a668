"""The etcd template (ktest.controlplane.etcd_template): a control plane started on a copy
of bootstrapped etcd data is the same cluster as one that bootstrapped itself, and the
template is built once, atomically, and rebuilt when damaged.

Two planes serve several tests each: ``bootstrapped`` (startup_planes.py's
``self_bootstrapped_plane``, shared with test_bad_input.py: its cache unwritable, so it has no
template and bootstraps itself) and the module's ``from_template``; each one's cluster is
snapshotted as it starts, before a test changes it. Readiness on a plane without the template is
checked on startup_planes.py's ``user_flags_plane`` (a flag of the user's bypasses the template)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlparse

import kubernetes
import pytest
from controlplane_helpers import client_for

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane, etcd_template
from ktest.controlplane.apiserver import ApiServerClient
from ktest.errors import ControlPlaneError
from ktest.wait import eventually

if TYPE_CHECKING:
    from startup_planes import Seen

pytest_plugins = ("startup_planes",)  # its planes, one for every module using them
USER_FLAGS_PLANE = pytest.mark.xdist_group("startup-user-flags-plane")  # one worker starts it

# What the API server creates at bootstrap, and what it serves.
LISTS = {
    "namespaces": "/api/v1/namespaces",
    "clusterroles": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "clusterrolebindings": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "roles": "/apis/rbac.authorization.k8s.io/v1/roles",
    "rolebindings": "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    "flowschemas": "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
    "prioritylevelconfigurations": "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
    "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "services": "/api/v1/services",
    "configmaps": "/api/v1/configmaps",
    "serviceaccounts": "/api/v1/serviceaccounts",
    "servicecidrs": "/apis/networking.k8s.io/v1/servicecidrs",
    "ipaddresses": "/apis/networking.k8s.io/v1/ipaddresses",
    "leases": "/apis/coordination.k8s.io/v1/leases",
}


def _get(client: ApiServerClient, path: str) -> Any:
    status, body = client.get(path, timeout=10)
    assert status == 200, f"GET {path}: status {status}: {body[:300]!r}"
    return json.loads(body)


def _content(item: dict[str, Any]) -> str:
    """What an object says, without what differs between any two clusters (uid, times, versions)."""
    kept = {key: value for key, value in item.items() if key not in ("metadata", "status")}
    labels = item["metadata"].get("labels", {})
    return json.dumps({"spec": kept, "labels": labels}, sort_keys=True)


def _client(plane: ControlPlane) -> ApiServerClient:
    certs = plane.directory / "certs"
    port = urlparse(plane.server).port
    assert port is not None
    return ApiServerClient(port, certs / "ca.crt", certs / "admin.crt", certs / "admin.key")


def cluster_snapshot(plane: ControlPlane) -> dict[str, Any]:
    """Bootstrap objects (name -> content) and served API group versions and resources."""
    client = _client(plane)
    snapshot: dict[str, Any] = {}
    for kind, path in LISTS.items():
        items = _get(client, path)["items"]
        for item in items:  # the `kubernetes` Service points at this API server's own port
            if kind == "services" and item["metadata"]["name"] == "kubernetes":
                assert item["spec"]["ports"][0]["targetPort"] == client.port
                item["spec"]["ports"][0]["targetPort"] = "<this API server's port>"
        snapshot[kind] = {
            f"{item['metadata'].get('namespace', '')}/{item['metadata']['name']}": _content(item)
            for item in items
        }
    served = {"v1": sorted(r["name"] for r in _get(client, "/api/v1")["resources"])}
    for group in _get(client, "/apis")["groups"]:
        for version in group["versions"]:
            group_version = version["groupVersion"]
            resources = _get(client, f"/apis/{group_version}")["resources"]
            served[group_version] = sorted(r["name"] for r in resources)
    snapshot["served API groups and resources"] = served
    return snapshot


def _differences(slow: dict[str, Any], fast: dict[str, Any]) -> list[str]:
    found = []
    for kind in slow:
        if kind in ("configmaps", "leases"):  # contents: each cluster's own CA, renewal times
            slow_kind, fast_kind = set(slow[kind]), set(fast[kind])
            if slow_kind != fast_kind:
                found.append(f"{kind}: only bootstrapped {sorted(slow_kind - fast_kind)}, "
                             f"only from template {sorted(fast_kind - slow_kind)}")
            continue
        for name in sorted(set(slow[kind]) | set(fast[kind])):
            if slow[kind].get(name) != fast[kind].get(name):
                found.append(f"{kind} {name}: bootstrapped {str(slow[kind].get(name))[:2000]} | "
                             f"from template {str(fast[kind].get(name))[:2000]}")
    return found


def _wait_for_what_each_api_server_creates(plane: ControlPlane, which: str) -> None:
    """Each API server creates, after it is ready, the `kubernetes` Service (it names its own
    port; polled every 100 ms once /readyz is green) and its identity lease in kube-system
    (by a controller a post-start hook starts): the template leaves both out."""
    client = _client(plane)
    eventually(lambda: client.get("/api/v1/namespaces/default/services/kubernetes")[0] == 200,
               timeout=30, description=f"the kubernetes Service of {which}")
    identity = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=" + quote(
        "apiserver.kubernetes.io/identity=kube-apiserver"
    )
    eventually(lambda: bool(_get(client, identity)["items"]), timeout=30,
               description=f"the API server's identity lease in {which}")


@dataclasses.dataclass
class Started:
    plane: ControlPlane
    snapshot: dict[str, Any]  # cluster_snapshot() once it had created its own objects


TEMPLATE_PLANES = pytest.mark.xdist_group("etcd-template-planes")  # one worker starts them


def _started(plane: ControlPlane, which: str) -> Started:
    _wait_for_what_each_api_server_creates(plane, which)
    return Started(plane, cluster_snapshot(plane))


@dataclasses.dataclass
class Bootstrapped:
    """The shared ``self_bootstrapped_plane`` (startup_planes.py), as seen while it ran."""

    template: Path | None
    snapshot: dict[str, Any]
    default_namespace: int  # HTTP status of reading the default namespace


def _bootstrapped(plane: ControlPlane) -> Bootstrapped:
    snapshot = _started(plane, "the bootstrapped cluster").snapshot
    return Bootstrapped(plane._template, snapshot, _client(plane).get("/api/v1/namespaces/default")[0])


SEEN_ON_SELF_BOOTSTRAPPED_PLANE = (_bootstrapped,)


@pytest.fixture
def bootstrapped(self_bootstrapped_plane: Seen) -> Bootstrapped:
    """A plane whose cache is unwritable: it has no template, so it bootstraps itself."""
    return self_bootstrapped_plane.result(_bootstrapped)


@pytest.fixture(scope="module")
def from_template(assets: Assets) -> Iterator[Started]:
    """A plane started on a copy of the template."""
    with ControlPlane(assets=assets, controllers="none") as plane:
        yield _started(plane, "the cluster started from the template")


@TEMPLATE_PLANES
def test_a_plane_started_from_the_template_is_the_same_cluster(
    bootstrapped: Bootstrapped, from_template: Started
) -> None:
    assert bootstrapped.template is None
    fast = from_template.plane
    assert fast._template is not None and etcd_template.is_complete(fast._template)
    # and it is a working cluster of its own: a write lands and reads back
    api = client_for(fast.kubeconfig)
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespaced_config_map("default", {"metadata": {"name": "written"}, "data": {"k": "v"}})
    assert core.read_namespaced_config_map("written", "default").data == {"k": "v"}
    api.close()
    slow = bootstrapped.snapshot
    assert len(slow["clusterroles"]) > 50 and len(slow["flowschemas"]) > 5
    assert {"/default", "/kube-system", "/kube-public", "/kube-node-lease"} <= set(slow["namespaces"])
    assert _differences(slow, from_template.snapshot) == []


def test_the_comparison_sees_a_missing_bootstrap_object() -> None:
    slow = {"clusterroles": {"/view": "rules", "/edit": "rules"}, "configmaps": {"a/b": "x"}}
    fast = {"clusterroles": {"/view": "rules"}, "configmaps": {"a/b": "y"}}
    assert _differences(slow, fast) == ["clusterroles /edit: bootstrapped rules | from template None"]
    assert _differences(slow, {**fast, "configmaps": {}}) == [
        "clusterroles /edit: bootstrapped rules | from template None",
        "configmaps: only bootstrapped ['a/b'], only from template []",
    ]


def _fake_etcd_data(directory: Path) -> Path:
    """A data directory shaped like etcd's: a WAL segment preallocated with zeros, a db, a .tmp."""
    wal = directory / "member" / "wal"
    wal.mkdir(parents=True)
    (directory / "member" / "snap").mkdir()
    (wal / "0000000000000000-0000000000000000.wal").write_bytes(b"\x01" * 5000 + b"\0" * (1 << 22))
    (wal / "0.tmp").write_bytes(b"\0" * (1 << 20))
    (directory / "member" / "snap" / "db").write_bytes(b"\x02" * 10000)
    return directory


def test_store_trims_the_wal_and_restore_gives_the_same_data(tmp_path: Path) -> None:
    data = _fake_etcd_data(tmp_path / "data")
    etcd_template.store(data, tmp_path / "templates" / "key")
    template = tmp_path / "templates" / "key"
    assert etcd_template.is_complete(template)
    stored_wal = template / "member" / "wal" / "0000000000000000-0000000000000000.wal"
    assert stored_wal.stat().st_size == 12288  # 5000 bytes, rounded to pages, one zero page after
    assert not (template / "member" / "wal" / "0.tmp").exists()
    assert [p.name for p in (tmp_path / "templates").iterdir()] == ["key"]  # no partial directory left
    assert etcd_template.bootstrap_objects(template) is None  # no names: readiness waits for the hooks

    etcd_template.restore(template, tmp_path / "copy")
    copy = tmp_path / "copy"
    wal = (copy / "member" / "wal" / stored_wal.name).read_bytes()
    assert wal[:5000] == b"\x01" * 5000 and set(wal[5000:]) == {0}
    assert (copy / "member" / "snap" / "db").read_bytes() == b"\x02" * 10000
    assert {oct(p.stat().st_mode & 0o777) for p in copy.rglob("*") if p.is_dir()} == {"0o700"}


def test_a_damaged_template_is_not_complete(tmp_path: Path) -> None:
    etcd_template.store(_fake_etcd_data(tmp_path / "data"), tmp_path / "t")
    (tmp_path / "t" / "member" / "snap" / "db").write_bytes(b"short")
    assert not etcd_template.is_complete(tmp_path / "t")
    (tmp_path / "t" / "member" / "snap" / "db").unlink()
    assert not etcd_template.is_complete(tmp_path / "t")
    assert not etcd_template.is_complete(tmp_path / "missing")


def test_concurrent_callers_build_the_template_once_and_a_damaged_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    builds: list[Path] = []
    removed: list[Path] = []
    barrier = threading.Barrier(4)

    def build() -> Path:
        data = _fake_etcd_data(tmp_path / f"build-{len(builds)}")
        builds.append(data)
        return data

    results: list[Path] = []

    def caller() -> None:
        barrier.wait()
        results.append(etcd_template.ensure("k", build, removed.append))

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and removed == builds
    assert len(set(results)) == 1 and len(results) == 4 and etcd_template.is_complete(results[0])
    assert sorted(p.name for p in etcd_template.templates_directory().iterdir()) == [".k.lock", "k"]

    (results[0] / "member" / "snap" / "db").write_bytes(b"damaged")
    (etcd_template.templates_directory() / ".k.partial-killed").mkdir()  # a store killed midway
    assert etcd_template.ensure("k", build, removed.append) == results[0]
    assert len(builds) == 2 and etcd_template.is_complete(results[0])
    assert sorted(p.name for p in etcd_template.templates_directory().iterdir()) == [".k.lock", "k"]


def test_a_failed_build_leaves_no_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def build() -> Path:
        raise RuntimeError("bootstrap failed")

    with pytest.raises(RuntimeError, match="bootstrap failed"):
        etcd_template.ensure("k", build, lambda _: None)
    assert sorted(p.name for p in etcd_template.templates_directory().iterdir()) == [".k.lock"]


@TEMPLATE_PLANES
def test_an_unwritable_cache_only_costs_the_template(bootstrapped: Bootstrapped) -> None:
    assert bootstrapped.template is None  # started with XDG_CACHE_HOME under a file
    assert bootstrapped.default_namespace == 200


def _ready_only_when_a_service_gets_a_cluster_ip(plane: ControlPlane) -> None:
    """On the shared ``user_flags_plane`` (startup_planes.py; its Service range a /28).

    The cluster IP allocator learns its ranges from an informer, which no /readyz check
    covers: readiness (from the template or not) proves a Service gets an IP. A flag the user
    adds bypasses the template: the readiness of a plane bootstrapped by its hooks also waits for
    the ``kubernetes`` Service (see the next test)."""
    assert plane._template is None
    _check_ready_only_with_the_kubernetes_service(plane, None)
    client = _client(plane)
    objects = client.bootstrap_objects()
    assert objects is not None
    assert client.ready() and client.ready(objects)
    core = kubernetes.client.CoreV1Api(client_for(plane.kubeconfig))
    created = 0
    while True:  # fill the range
        try:
            core.create_namespaced_service("default", {
                "metadata": {"name": f"fill-{created}"}, "spec": {"ports": [{"port": 80}]}})
        except kubernetes.client.ApiException as error:
            assert error.status == 500 and "range is full" in str(error.body), error
            break
        created += 1
        assert created < 16, f"a /28 took {created} Services"
    assert created == 13
    problem = client.service_ip_problem()
    assert problem is not None and "status 500" in problem and "range is full" in problem, problem
    assert not client.ready() and not client.ready(objects)
    core.delete_namespaced_service("fill-0", "default")
    assert client.ready() and client.ready(objects)
    # the probe leaves nothing behind: the freed address is still free
    core.create_namespaced_service("default", {
        "metadata": {"name": "after"}, "spec": {"ports": [{"port": 80}]}})
    names = {service.metadata.name for service in core.list_namespaced_service("default").items}
    assert "ktest-readiness-probe" not in names


SEEN_ON_USER_FLAGS_PLANE = (_ready_only_when_a_service_gets_a_cluster_ip,)


@USER_FLAGS_PLANE
def test_ready_only_when_a_service_gets_a_cluster_ip(user_flags_plane: Seen) -> None:
    """See _ready_only_when_a_service_gets_a_cluster_ip, which ran while the plane ran."""
    assert user_flags_plane.flags["service-cluster-ip-range"] == "10.0.0.0/28"
    user_flags_plane.result(_ready_only_when_a_service_gets_a_cluster_ip)


@TEMPLATE_PLANES
def test_not_ready_while_the_kubernetes_service_is_missing(from_template: Started) -> None:
    """A controller of the API server creates the ``kubernetes`` Service after ``/readyz``
    passes, so readiness checks for it: a plane called ready before it existed let a test's
    Service take its address (a full /28 held 14 test Services, not 13). From the template here;
    without it in the previous test."""
    plane = from_template.plane
    assert plane._template is not None
    objects = _client(plane).bootstrap_objects()
    try:
        _check_ready_only_with_the_kubernetes_service(plane, objects)
    finally:  # the API server puts the Service back: the next test needs the plane ready
        eventually(lambda: _client(plane).ready(objects), timeout=60, description="the plane ready again")


@TEMPLATE_PLANES
def test_a_plane_from_the_template_is_ready_only_with_every_bootstrap_object(
    from_template: Started, assets: Assets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readiness from the template skips the bootstrap hooks' timer, never their objects: one
    deleted makes the plane unready, and a template naming one that is never created never
    starts. (The last test here on ``from_template``: it leaves it restarted.)"""
    plane = from_template.plane
    template, objects = plane._template, plane._bootstrap
    assert template is not None and objects is not None
    assert objects == etcd_template.bootstrap_objects(template)
    assert {"/default", "/kube-system", "/kube-public", "/kube-node-lease"} <= set(objects["namespaces"])
    assert "/cluster-admin" in objects["clusterroles"]
    assert "/system-node-critical" in objects["priorityclasses"]
    client = _client(plane)
    assert client.ready(objects), "not ready (as start() left it, and every test here leaves it)"
    assert client.missing_bootstrap_objects(objects) == []
    # what every test may rely on from the first moment: the admin and RBAC for other users
    # (deleted once the hooks are done: still in their second, they would put it back)
    eventually(lambda: client.get("/readyz")[0] == 200, timeout=30, description="the hooks done")
    api = client_for(plane.kubeconfig)
    kubernetes.client.RbacAuthorizationV1Api(api).delete_cluster_role("view")
    api.close()
    assert client.missing_bootstrap_objects(objects) == ["clusterroles /view"]
    assert not client.ready(objects)
    plane.restart()  # on data that is not a fresh copy the hooks decide again (and put view back)
    assert plane._bootstrap is None
    assert _client(plane).get("/apis/rbac.authorization.k8s.io/v1/clusterroles/view")[0] == 200
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    copy = etcd_template.templates_directory() / template.name
    shutil.copytree(template, copy)
    manifest = json.loads((copy / etcd_template.MANIFEST).read_text())
    manifest["bootstrap"]["clusterroles"].append("/ktest-never-created")
    (copy / etcd_template.MANIFEST).write_text(json.dumps(manifest))
    plane = ControlPlane(assets=assets, controllers="none", start_timeout=4)
    with pytest.raises(ControlPlaneError, match="not served: clusterroles /ktest-never-created"):
        plane.start()
    assert plane._template == copy


def _check_ready_only_with_the_kubernetes_service(
    plane: ControlPlane, objects: dict[str, list[str]] | None
) -> None:
    client = _client(plane)
    core = kubernetes.client.CoreV1Api(client_for(plane.kubeconfig))
    service = core.read_namespaced_service("kubernetes", "default")
    assert service.spec.cluster_ip == "10.0.0.1"
    # the template's copy names the port of the plane that bootstrapped it; this plane's is here
    assert [port.target_port for port in service.spec.ports] == [client.port]
    assert client.ready(objects)
    core.delete_namespaced_service("kubernetes", "default")
    assert not client.ready(objects), "ready without the kubernetes Service"
    # the API server puts it back (it reconciles it every 10 s), and the plane is ready again
    eventually(lambda: client.ready(objects), timeout=60, description="ready again")
