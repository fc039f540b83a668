"""The bad-input catalogue: every case is a mistake a user makes, and
the error must name what was wrong (setting and its source, file and line, path,
server, name) and how to fix it, with nothing left behind: no new process, no
directory in the temp or run directory, no half-installed cache entry.

Cases that need a control plane use the real binaries; nothing is faked but the
world outside Kubernetes (an unreachable address, a missing Docker engine)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cli_runs import run_ktest_cli
from messages import assert_says
from processes import descendants

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Sandbox:
    root: Path
    tmp: Path
    run: Path
    cache: Path
    assets: Assets
    monkeypatch: pytest.MonkeyPatch
    cleanups: list[Callable[[], object]] = field(default_factory=list)
    plane: ControlPlane | None = None  # for the cases in NEEDS_PLANE

    def file(self, name: str, text: str) -> Path:
        path = self.root / "files" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def cli(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run ``python -m ktest ...``; raise CliFailed with its stderr when it fails."""
        done = run_ktest_cli(*args, env={**os.environ, **(env or {})}, cwd=self.root)
        if done.returncode == 0:
            return done.stdout
        assert "Traceback" not in done.stderr, done.stderr
        raise CliFailed(done.stderr)


class CliFailed(Exception):
    pass


def _children() -> set[int]:
    """Live descendants of this process."""
    return set(descendants(os.getpid()))


@pytest.fixture
def sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, assets: Assets, request: pytest.FixtureRequest
) -> Iterator[Sandbox]:
    plane = None
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("trigger") in NEEDS_PLANE:
        # The hardening tests' shared plane (conftest.py): each case only fails to authenticate to
        # it. Asked for before the sandbox: if it starts now, its processes and files are not the case's.
        plane = request.getfixturevalue("plane")
        plane.check()  # healthy, as the one before left it
    box = Sandbox(tmp_path, tmp_path / "tmp", tmp_path / "run", tmp_path / "cache", assets, monkeypatch)
    box.plane = plane
    for directory in (box.tmp, box.run):
        directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(box.tmp))
    monkeypatch.setenv("TMPDIR", str(box.tmp))
    monkeypatch.setenv("KTEST_RUN_DIR", str(box.run))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for variable in ("KTEST_BACKEND", "KTEST_REUSE", "KTEST_CONTROLLERS", "KUBEBUILDER_ASSETS", "KTEST_CRDS"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("KTEST_ASSETS", str(assets.directory))
    before = _children()
    yield box
    for cleanup in reversed(box.cleanups):
        cleanup()
    deadline = time.monotonic() + 15
    while (_children() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (_children() - before), "a process was left running"
    assert not list(box.run.iterdir()), f"left in the run directory: {list(box.run.iterdir())}"
    assert not list(box.tmp.iterdir()), f"left in TMPDIR: {list(box.tmp.iterdir())}"
    if box.cache.exists():
        assert not list(box.cache.rglob(".tmp-*")), "a half-installed cache entry was left"


# ---------------------------------------------------------------- the cases


def settings(**env: str) -> Callable[[Sandbox], Any]:
    def trigger(box: Sandbox) -> Any:
        from ktest.config import settings_from_env

        return settings_from_env({**os.environ, **env}, cwd=box.root)

    return trigger


def bad_setting(
    variable: str, value: str, *fragments: str
) -> tuple[Callable[[Sandbox], Any], tuple[str, ...]]:
    """A case of one setting with a bad value: its message names the variable, and ``fragments``."""
    return settings(**{variable: value}), (variable, *fragments)


def start_plane(**kwargs: Any) -> Callable[[Sandbox], Any]:
    def trigger(box: Sandbox) -> Any:
        from ktest.controlplane import ControlPlane

        kwargs.setdefault("assets", box.assets)
        with ControlPlane(**kwargs):
            pass

    return trigger


def start_plane_in(directory: Callable[[Sandbox], Path]) -> Callable[[Sandbox], Any]:
    def trigger(box: Sandbox) -> Any:
        return start_plane(root_directory=directory(box), controllers="none")(box)

    return trigger


def resolve(selector: str | None, *, isolated: bool = True, **env: str) -> Callable[[Sandbox], Any]:
    def trigger(box: Sandbox) -> Any:
        from ktest.assets import resolve_assets

        if isolated:
            box.monkeypatch.setenv("KTEST_CACHE_DIR", str(box.cache))
            box.monkeypatch.setenv("XDG_DATA_HOME", str(box.root / "data"))
            box.monkeypatch.setenv("KTEST_ENVTEST_INDEX_URL", "http://127.0.0.1:9/index.yaml")
            box.monkeypatch.setenv("KTEST_K8S_RELEASE_URL", "http://127.0.0.1:9/release")
            box.monkeypatch.setenv("PATH", "/nonexistent-bin")  # no `go`: no build
            box.monkeypatch.delenv("KTEST_ASSETS")
        for name, value in env.items():
            box.monkeypatch.setenv(name, value.replace("{root}", str(box.root)))
        return resolve_assets(selector, progress=False)

    return trigger


def corrupt_cache(box: Sandbox) -> Any:
    """A copy of the real binaries installed in a private cache, then one byte flipped."""
    import shutil

    from ktest.assets import resolve_assets, store
    from ktest.assets.progress import Progress

    box.monkeypatch.setenv("KTEST_CACHE_DIR", str(box.cache))
    box.monkeypatch.delenv("KTEST_ASSETS")
    box.monkeypatch.setenv("XDG_DATA_HOME", str(box.root / "data"))
    locations = store.Locations.from_env()
    version = box.assets.version

    def copy(scratch: Path) -> dict[str, str]:
        for name in ("kube-apiserver", "etcd", "kube-controller-manager", "kubectl"):
            shutil.copy2(box.assets.directory / name, scratch / name)  # a copy: never the shared cache
        return {}

    with store.install_lock(locations, version, Progress(enabled=False)) as installer:
        entry = installer.install("build", copy)
    with (entry.directory / "etcd").open("r+b") as file:
        file.seek(1000)
        byte = file.read(1)
        file.seek(1000)
        file.write(bytes([byte[0] ^ 0xFF]))
    return resolve_assets(version, progress=False)


def manifest(text: str, *, crds: bool = False) -> Callable[[Sandbox], Any]:
    def trigger(box: Sandbox) -> Any:
        from ktest.cluster.manifests import load_located

        path = box.file("manifest.yaml", text)
        if crds:
            from ktest.cluster.crds import _check_is_crd

            return [_check_is_crd(item) for item in load_located(path)]
        from ktest.cluster.manifests import _validate

        return [_validate(item) for item in load_located(path)]

    return trigger


CRD_TEXT = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object}}
"""


def crd_with(old: str, new: str) -> Callable[[Sandbox], Any]:
    """A CRD file with one mistake: ``old`` (which must be in CRD_TEXT) replaced by ``new``."""
    assert old in CRD_TEXT
    return manifest(CRD_TEXT.replace(old, new, 1), crds=True)


def crd_file(data: bytes) -> Callable[[Sandbox], Any]:
    """A CRD file of raw bytes, read as ``install_crds`` does before it installs anything."""

    def trigger(box: Sandbox) -> Any:
        from ktest.cluster.crds import _check_is_crd
        from ktest.cluster.manifests import load_as
        from ktest.errors import CRDError

        path = box.root / "files" / "crd.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return [_check_is_crd(item) for item in load_as(path, CRDError, "cannot read CRDs")]

    return trigger


def crd_plus(extra: str) -> bytes:
    """CRD_TEXT with ``extra`` (a top-level field, a line of its own) at its end: line 13."""
    return (CRD_TEXT + extra).encode()


def nested_mapping(depth: int) -> str:
    """``x:`` holding ``depth`` mappings, one in the other, in block style."""
    levels = "".join("  " * level + f"  k{level}:\n" for level in range(depth))
    return "x:\n" + levels + "  " * depth + "  v: 1\n"


# A few hundred bytes that expand to 10^8 nodes if written out ("billion laughs").
ALIAS_BOMB = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx0: &x0 [a, a, a, a, a, a, a, a, a, a]\n"
    + "".join(f"x{n}: &x{n} [{', '.join([f'*x{n - 1}'] * 10)}]\n" for n in range(1, 8))
)


def existing(server: str) -> Callable[[Sandbox], Any]:
    def trigger(box: Sandbox) -> Any:
        from ktest.backends.existing.backend import ExistingBackend
        from ktest.base.certs import CertificateAuthority
        from ktest.base.kubeconfig import write_kubeconfig

        ca = CertificateAuthority(box.root / "ca")
        pair = ca.client("u", "u")
        path = write_kubeconfig(
            box.root / "kubeconfig",
            server=server,
            ca_pem=ca.cert_pem,
            user="u",
            client_cert_pem=pair.cert_pem,
            client_key_pem=pair.key_pem,
        )
        return ExistingBackend(path, "u@ktest", timeout=3)

    return trigger


def existing_settings(kubeconfig_text: str, context: str) -> Callable[[Sandbox], Any]:
    def trigger(box: Sandbox) -> Any:
        from ktest.backends import open_backend
        from ktest.config import settings_from_env

        path = box.file("kubeconfig", kubeconfig_text)
        env = {
            **os.environ,
            "KTEST_BACKEND": "existing",
            "KTEST_KUBECONFIG": str(path),
            "KTEST_CONTEXT": context,
        }
        return open_backend(settings_from_env(env, cwd=box.root))

    return trigger


def engine_absent(box: Sandbox) -> Any:
    from ktest.backends.kind import engine

    return engine.connect({**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"})


def full_disk(box: Sandbox) -> Path:
    """A 1 MiB tmpfs: etcd's write-ahead log alone needs far more."""
    mount = box.root / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    box.cleanups.append(lambda: subprocess.run(["umount", "-l", str(mount)], check=False))
    return mount


def cli(*args: str) -> Callable[[Sandbox], Any]:
    return lambda box: box.cli(*args)


PIN = ("--repository", "example/ktest", "--ref", "a" * 40)


def cli_os_error(*args: str, **env: str) -> Callable[[Sandbox], Any]:
    """A command meeting a path it cannot use: one line on stderr, exit 2, no traceback."""

    def trigger(box: Sandbox) -> Any:
        env_of_box = {name: value.format(root=box.root) for name, value in env.items()}
        done = run_ktest_cli(*args, env={**os.environ, **env_of_box}, cwd=box.root)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 2, (done.returncode, done.stderr)
        lines = done.stderr.strip().splitlines()  # progress lines may come first
        errors = [line for line in lines if line.startswith("ktest: error:")]
        assert len(errors) == 1 and lines[-1] == errors[0], done.stderr
        raise CliFailed(errors[0])

    return trigger


# The triggers that need a real control plane (the shared ``plane``, in ``box.plane``).
NEEDS_PLANE: set[Callable[[Sandbox], Any]] = set()


def existing_as(user: dict[str, Any], plugin: str = "", **options: float) -> Callable[[Sandbox], Any]:
    """Backend existing on a real control plane, as a kubeconfig user whose credentials never
    reach it; ``plugin``: the body of an exec plugin script ``plugin`` runs; ``options``: of
    ExistingBackend (``exec_timeout``)."""

    def trigger(box: Sandbox) -> Any:
        import yaml

        from ktest.backends.existing.backend import ExistingBackend

        plane = box.plane
        assert plane is not None, "a case of NEEDS_PLANE"
        credentials = user
        if plugin:
            script = box.file("plugin", f"#!/bin/sh\n{plugin}\n")
            script.chmod(0o700)
            credentials = {"exec": {**user["exec"], "command": str(script)}}
        cluster = {"server": plane.server, "certificate-authority": str(plane.directory / "certs/ca.crt")}
        config = {
            "clusters": [{"name": "plane", "cluster": cluster}],
            "users": [{"name": "dev", "user": credentials}],
            "contexts": [{"name": "dev@plane", "context": {"cluster": "plane", "user": "dev"}}],
            "current-context": "dev@plane",
        }
        kubeconfig = box.file("kubeconfig", yaml.safe_dump(config))
        return ExistingBackend(kubeconfig, "dev@plane", timeout=10, **options)

    NEEDS_PLANE.add(trigger)
    return trigger


def existing_offline(user_name: str, credentials: dict[str, Any]) -> Callable[[Sandbox], Any]:
    """Backend existing with a kubeconfig that fails before any request is sent."""

    def trigger(box: Sandbox) -> Any:
        import yaml

        from ktest.backends.existing.backend import ExistingBackend

        config = {
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
            "users": [{"name": user_name, "user": credentials}],
            "contexts": [{"name": "dev@c", "context": {"cluster": "c", "user": user_name}}],
            "current-context": "dev@c",
        }
        return ExistingBackend(box.file("kubeconfig", yaml.safe_dump(config)), "dev@c", timeout=3)

    return trigger


def exec_user(command: str) -> dict[str, Any]:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": command}}


def user_issue(name: str) -> Callable[[Sandbox], Any]:
    def trigger(box: Sandbox) -> Any:
        from ktest.sessions.users import issue_user

        return issue_user(box.root / "no-control-plane", name, ["g"])

    return trigger


KUBECONFIG_OTHER_CURRENT = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: prod, context: {cluster: c, user: u}}, {name: test, context: {cluster: c, user: u}}]
current-context: prod
"""

# error type name -> {case id: (trigger, fragments that must all appear in the message)}
CASES_BY_ERROR: dict[str, dict[str, tuple[Callable[[Sandbox], Any], tuple[str, ...]]]] = {
    "ConfigError": {  # settings and kubeconfigs: the setting, its source and the allowed values named
        "existing-user-name-with-nul": (  # was: ValueError: embedded null byte
            existing_offline("de\0v", {"client-certificate-data": "eA==", "client-key-data": "eA=="}),
            ("the user name 'de\\x00v'", "files/kubeconfig", "holds a NUL byte", "rename it"),
        ),
        "backend-unknown": bad_setting("KTEST_BACKEND", "kube", "'kube'", "bare", "existing"),
        "timeout-negative": bad_setting("KTEST_TIMEOUT", "-1", "'-1'", "finite number of seconds"),
        "interval-zero": bad_setting("KTEST_INTERVAL", "0", "more than 0"),
        "keep-namespaces-unknown": bad_setting(
            "KTEST_KEEP_NAMESPACES", "sometimes", "never", "on-failure", "always"
        ),
        "namespace-deletion-unknown": bad_setting("KTEST_NAMESPACE_DELETION", "later", "wait", "background"),
        "reuse-not-a-boolean": bad_setting("KTEST_REUSE", "maybe", "'maybe'", "true"),
        "version-malformed": bad_setting("KTEST_K8S_VERSION", "1.x", "1.x", "exact release like 1.37.2"),
        "crd-path-missing": bad_setting(
            "KTEST_CRDS", "/nonexistent/crds", "/nonexistent/crds", "does not exist"
        ),
        "controllers-none-mixed": bad_setting(
            "KTEST_CONTROLLERS", "none,namespace", "mixes 'none'", "garbagecollector,namespace"
        ),
        "controllers-not-a-name": bad_setting(
            "KTEST_CONTROLLERS", "garbage collector!", "'garbage collector!'", "comma-separated"
        ),
        "existing-without-context": (
            settings(KTEST_BACKEND="existing"),
            ("backend existing", "--ktest-context", "KTEST_CONTEXT"),
        ),
        "existing-not-current-context": (
            existing_settings(KUBECONFIG_OTHER_CURRENT, "test"),
            ("current context", "'prod'", "use-context test"),
        ),
        "existing-unknown-context": (
            existing_settings(KUBECONFIG_OTHER_CURRENT, "staging"),
            ("'staging'", "prod, test"),
        ),
        "existing-kubeconfig-not-yaml": (
            existing_settings("clusters: [\n", "x"),
            ("cannot read kubeconfig", "kubeconfig"),
        ),
    },
    "ControlPlaneError": {  # control plane arguments and run directory
        "controller-unknown": (
            start_plane(controllers="garbagecollector,nosuchcontroller"),
            ("'nosuchcontroller'", "knows:", "controllers='none'"),
        ),
        "apiserver-flag-reserved": (
            start_plane(apiserver_flags=["--secure-port=1"]),
            ("--secure-port", "Remove those flags"),
        ),
        "apiserver-flag-etcd-reserved": (
            start_plane(apiserver_flags=["--etcd-servers=http://x"]),
            ("--etcd-servers", "Remove those flags"),
        ),
        "apiserver-flags-string": (start_plane(apiserver_flags="--v=2"), ("must be a list", "['--v=2']")),
        "apiserver-flag-without-dashes": (
            start_plane(apiserver_flags=["v=2"], controllers="none"),
            ("'v=2'", "'--name=value'"),
        ),
        "apiserver-flag-unknown": (
            start_plane(apiserver_flags=["--no-such-flag=1"], controllers="none"),
            ("--no-such-flag", "does not know", "kube-apiserver --help"),
        ),
        "run-dir-unwritable": (
            start_plane_in(lambda box: Path("/proc/ktest-cannot-write-here")),
            ("/proc", "KTEST_RUN_DIR", "--ktest-run-dir"),
        ),
        "run-dir-full": (start_plane_in(full_disk), ("tiny", "df -h", "KTEST_RUN_DIR")),
    },
    "AssetsError": {  # binaries
        "assets-directory-missing": (
            start_plane(assets="/nonexistent/bin"),
            ("/nonexistent/bin does not exist", "assets=None"),
        ),
        "ktest-assets-missing": (
            resolve(None, isolated=False, KTEST_ASSETS="/nonexistent/bin"),
            ("KTEST_ASSETS=/nonexistent/bin", "not a directory", "unset it"),
        ),
        "ktest-assets-incomplete": (
            resolve(None, isolated=False, KTEST_ASSETS="{root}"),
            ("has no executable", "kube-apiserver", "ktest binaries path"),
        ),
        "ktest-assets-wrong-version": (
            resolve("1.20.0", isolated=False),
            ("holds Kubernetes", "1.20.0", "Unset KTEST_ASSETS"),
        ),
        "version-malformed-selector": (resolve("banana"), ("banana", "exact release like 1.37.2", "latest")),
        "version-unavailable-offline": (
            resolve("1.99.0"),
            ("1.99.0", "Three ways out", "KTEST_ASSETS", "install Go"),
        ),
        "cache-corrupt": (
            corrupt_cache,
            ("etcd: SHA-256", "corrupt", "ktest binaries install --k8s-version"),
        ),
    },
    "CliFailed": {  # CLI commands, and paths they cannot use
        "binaries-source-unknown": (
            cli("binaries", "install", "--source", "ftp"),
            ("--source", "'ftp'", "auto", "download", "build"),
        ),
        "warm-plane-bad-name": (cli("up", "--name", "bad name!"), ("'bad name!'", "letters, digits")),
        "warm-plane-unknown": (cli("down", "--name", "nothere"), ("'nothere'", "ktest status")),
        "down-existing-without-context": (
            lambda box: box.cli("down", "--backend", "existing", env={"KTEST_CONTEXT": ""}),
            ("needs the kubeconfig context named explicitly", "--context NAME", "KTEST_CONTEXT"),
        ),
        "cli-init-path-in-missing-directory": (
            cli_os_error("init", "github-actions", "--path", "/proc/nope/x.yml", *PIN),
            ("ktest: error:", "/proc/nope", "No such file or directory", "check the path"),
        ),
        "cli-init-path-is-a-directory": (
            cli_os_error("init", "github-actions", "--path", "/proc/self", "--force", *PIN),
            ("ktest: error:", "/proc/self", "check the path"),
        ),
        "cli-up-state-dir-unusable": (
            cli_os_error("up", "--name", "x", XDG_STATE_HOME="/proc/nope/state"),
            ("ktest: error:", "/proc/nope", "check the path"),
        ),
    },
    "ManifestError": {  # manifests
        "manifest-not-yaml": (
            manifest("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n"),
            ("manifest.yaml", "line", "not valid YAML", "Fix the syntax"),
        ),
        "manifest-without-kind": (
            manifest("apiVersion: v1\nmetadata: {name: a}\n"),
            ("manifest.yaml, document 1", "missing kind", "apiVersion, kind and metadata.name"),
        ),
        "manifest-a-list-of-strings": (
            manifest("- a\n- b\n"),
            ("manifest.yaml, document 1", "expected a Kubernetes object"),
        ),
        "manifest-list-item-not-an-object": (
            manifest("apiVersion: v1\nkind: List\nitems:\n  - just a string\n"),
            ("manifest.yaml, document 1", "item 0 (line 4)", "expected a Kubernetes object"),
        ),
        "yaml-alias-bomb": (
            manifest(ALIAS_BOMB),
            ("manifest.yaml, document 1", "alias bomb", "1,000,000", "refused while parsing"),
        ),
        "yaml-alias-loop": (
            manifest("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: &d {k: *d}\n"),
            ("manifest.yaml, document 1", "line 4", "contains itself"),
        ),
    },
    "CRDError": {  # CRD files
        "crd-path-holds-a-configmap": (
            manifest("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", crds=True),
            ("manifest.yaml", "ConfigMap", "is not a CustomResourceDefinition", "cluster.apply"),
        ),
        "crd-version-without-name": (  # was KeyError: 'name'
            crd_with("    - name: v1\n      served", "    - served"),
            ("manifest.yaml, document 1", "widgets.example.com", "spec.versions[0].name (line 9)", "missing"),
        ),
        "crd-spec-a-list": (  # was AttributeError
            crd_with("spec:\n  group", "spec: [group]\nx:\n  group"),
            ("manifest.yaml, document 1", "spec (line 4)", "is a list", "not a mapping"),
        ),
        "crd-versions-a-mapping": (  # was AttributeError
            crd_with("  versions:\n    - name: v1", "  versions:\n      name: v1"),
            ("manifest.yaml, document 1", "spec.versions (line 8)", "is a mapping", "non-empty list"),
        ),
        "crd-version-a-string": (
            manifest(CRD_TEXT.split("    - name")[0] + "    - v1\n", crds=True),
            ("spec.versions[0] (line 9)", "is a string ('v1')", "not a mapping"),
        ),
        "crd-served-a-string": (
            crd_with("served: true", 'served: "true"'),
            ("manifest.yaml, document 1", "spec.versions[0].served (line 10)", "not a boolean", "unquoted"),
        ),
        "crd-no-storage-version": (
            crd_with("storage: true", "storage: false"),
            ("spec.versions (line 8)", "exactly one version storage: true", "none is"),
        ),
        "crd-names-without-kind": (
            crd_with("names: {plural: widgets, kind: Widget}", "names: {plural: widgets}"),
            ("spec.names.kind (line 7)", "missing", "e.g. Widget"),
        ),
        "crd-scope-unknown": (
            crd_with("scope: Namespaced", "scope: namespaced"),
            ("spec.scope (line 6)", "'namespaced'", "Namespaced, Cluster"),
        ),
        "crd-schema-missing": (
            crd_with("      schema: {openAPIV3Schema: {type: object}}\n", ""),
            ("spec.versions[0].schema (line 9)", "missing", "openAPIV3Schema"),
        ),
        "crd-subresources-a-list": (
            crd_with("      schema:", "      subresources: [status]\n      schema:"),
            ("spec.versions[0].subresources (line 12)", "is a list", "not a mapping"),
        ),
        "crd-name-not-plural-dot-group": (
            crd_with("{name: widgets.example.com}", "{name: widget.example.com}"),
            ("metadata.name (line 3)", "<spec.names.plural>.<spec.group>", "name it widgets.example.com"),
        ),
        "crd-over-the-request-limit": (  # was 4-18 s of retries, then a 178-line MaxRetryError
            crd_with("{type: object}", "{type: object, description: '" + "x" * (20 << 20) + "'}"),
            ("manifest.yaml, document 1", "20.0 MiB", "3.0 MiB (3145728 bytes)", "nothing was installed"),
        ),
        # Issue 50.7: each was a raw exception (UnicodeDecodeError, ConstructorError, ValueError,
        # RecursionError part-way through an install).
        "crd-file-not-utf8": (
            crd_file(b"apiVersion: apiextensions.k8s.io/v1\nkind: \xff\xfe\n"),
            ("crd.yaml: line 2", "not UTF-8 text", "byte 0xff", "save it as UTF-8"),
        ),
        "crd-file-binary": (
            crd_file(bytes(range(128)) * 4),
            ("crd.yaml: line 1", "control character U+0000", "a binary file?"),
        ),
        "crd-file-binary-not-utf8": (
            crd_file(b"\x7fELF" + bytes(range(128, 256))),
            ("crd.yaml: line 1", "not UTF-8 text", "byte 0x80", "a binary file?"),
        ),
        "crd-python-tag": (
            crd_file(crd_plus("x: !!python/object/apply:os.system [echo hi]\n")),
            ("crd.yaml, document 1", "line 13", "python/object/apply:os.system", "not plain YAML",
             "Remove the tag"),
        ),
        "crd-unknown-tag": (
            crd_file(crd_plus("x: !custom 3\n")),
            ("crd.yaml, document 1", "line 13", "the tag !custom", "Remove the tag"),
        ),
        "crd-complex-key-list": (
            crd_file(crd_plus("? [a, b]\n: c\n")),
            ("crd.yaml, document 1", "line 13", "a mapping key that is a list", "Write the key as a string"),
        ),
        "crd-complex-key-mapping": (
            crd_file(crd_plus("{a: 1}: c\n")),
            ("crd.yaml, document 1", "line 13", "a mapping key that is a mapping",
             "Write the key as a string"),
        ),
        "crd-5000-digit-integer": (
            crd_file(crd_plus("x: " + "9" * 5000 + "\n")),
            ("crd.yaml, document 1", "line 13", "an integer of 5,000 characters", "Quote it"),
        ),
        "crd-990-deep-flow-sequence": (
            crd_file(crd_plus("x: " + "[" * 990 + "]" * 990 + "\n")),
            ("crd.yaml, document 1", "nested more than 200 levels deep (at line 13)", "flatten it"),
        ),
        "crd-900-deep-mapping": (
            crd_file(crd_plus(nested_mapping(900))),
            ("crd.yaml, document 1", "nested more than 200 levels deep (at line 2", "flatten it"),
        ),
    },
    "ClusterError": {  # clusters ktest cannot use
        "existing-refused": (
            existing("https://127.0.0.1:9"),
            ("https://127.0.0.1:9", "connection refused", "kubectl --kubeconfig"),
        ),
        "existing-dns": (
            existing("https://ktest-no-such-host.invalid:6443"),
            ("DNS", "ktest-no-such-host.invalid", "kubectl --kubeconfig"),
        ),
        "existing-exec-plugin-missing": (  # was: the start passed; tests failed as system:anonymous
            existing_as(exec_user("ktest-no-such-plugin")),
            ("system:anonymous", "'ktest-no-such-plugin'", "not on PATH", "exec.command", "auth whoami"),
        ),
        "existing-exec-plugin-fails": (
            existing_as(exec_user(""), plugin="echo 'token expired: log in again' >&2; exit 1"),
            ("system:anonymous", "failed: exec: process returned 1", "token expired: log in again"),
        ),
        "existing-user-without-credentials": (
            existing_as({}),
            ("system:anonymous", "user 'dev' has no credentials", "auth whoami"),
        ),
        "existing-exec-plugin-never-exits": (  # was: the session's start hung for good, saying nothing
            existing_as(exec_user(""), plugin="sleep 600", exec_timeout=2),
            ("exec credential plugin of user 'dev'", "files/kubeconfig", "did not finish within 2 s",
             "ktest waited for the credentials of context 'dev@plane'", "log in first"),
        ),
        "existing-error-names-the-users-kubeconfig": (  # was: the private copy in $TMPDIR named
            existing_offline("dev", {"client-certificate-data": "eA==", "client-key": "/nonexistent/key"}),
            ("backend existing: cannot use kubeconfig", "files/kubeconfig (context dev@c)",
             "/nonexistent/key"),
        ),
        "user-without-control-plane": (
            user_issue("op"),
            ("'op'", "no-control-plane", "is the control plane still running"),
        ),
    },
    "KindError": {  # kind
        "kind-engine-absent": (engine_absent, ("unix:///nonexistent/docker.sock", "no socket")),
    },
}
CASES = [
    (case_id, trigger, error_type, fragments)
    for error_type, cases in CASES_BY_ERROR.items()
    for case_id, (trigger, fragments) in cases.items()
]


# The cases on the shared plane run on the worker holding it (tests/conftest.py's PLANE_GROUPS).
ON_THE_SHARED_PLANE = pytest.mark.xdist_group("hardening-plane")


@pytest.mark.parametrize(
    ("trigger", "error_type", "fragments"),
    [
        pytest.param(*case[1:], id=case[0], marks=[ON_THE_SHARED_PLANE] if case[1] in NEEDS_PLANE else [])
        for case in CASES
    ],
)
def test_bad_input_is_named_with_the_fix(
    sandbox: Sandbox,
    trigger: Callable[[Sandbox], Any],
    error_type: str,
    fragments: tuple[str, ...],
) -> None:
    with pytest.raises(Exception) as caught:  # the type is checked by name below
        trigger(sandbox)
    error = caught.value
    assert type(error).__name__ == error_type, f"{type(error).__name__}: {error}"
    message = assert_says(error, *fragments)
    assert "Traceback" not in message


def test_the_catalogue_is_big_enough() -> None:
    assert len(CASES) >= 30 and len({case[0] for case in CASES}) == len(CASES)
