"""Soak: end test runs in every way and count what they leave behind.

    python scripts/soak.py [--runs N] [--backends bare,reuse,kind] [--quick] [--json]

Each run happens in a private sandbox (``TMPDIR``, ``KTEST_RUN_DIR``,
``XDG_STATE_HOME`` under one directory; binaries from the normal cache) and is
marked with an environment variable that every process it starts inherits.
A run is a real ``pytest`` session on a real control plane (its test holds a started
webhook set with a Python handler and an in-process operator), ended by one of:

* ``pass`` / ``fail``: the test passes or fails, the session ends normally;
* ``sigint`` (Ctrl-C: SIGINT to the whole process group), ``sigterm``,
  ``sigkill``: sent during start (the control plane's directory appeared),
  mid-test (the test body runs) or during teardown (the session is finishing).

Backend ``existing`` runs the same endings against a "user's cluster" the soak starts once
(a control plane with the namespace controller, outside every sandbox): what a run can
leave there is its test namespace, so namespaces labelled ``managed-by=ktest`` that the
run made and that are still there (not being deleted) count as leaks; the next start's
sweep there is ``ktest down --backend existing``. A Ctrl-C that ends a run with exit
status 0 counts as a failure too (the run looks passed).

Backend ``kind`` runs the same endings on a kind cluster of the run's own
(``start`` is then during ``kind create``; the test also holds a ``kubectl
port-forward``). Backend ``reuse`` runs the same endings against a ``ktest up`` daemon, plus
the daemon itself killed (``daemon-sigkill`` during its start and mid-test,
``daemon-sigterm`` mid-test); every reuse run ends with ``ktest down``, whose
word is checked too (it must not say "stopped" for a daemon that was dead).

After each run (once its processes are gone, waited for up to 30 s), what
it left is listed; what a killed process cannot remove itself (its socket or
scratch directory in ``TMPDIR``, owner recorded) is swept by the next start
or ``ktest down``, so the soak runs ``ktest down --all`` (and ``ktest down --kind``)
and counts that separately ("swept at next start"). Then the leaks are counted: processes
carrying the run's mark, directories and files left in the sandbox
(``ktest-cp-*``, ``ktest-share-*``, anything in ``TMPDIR``; a webhook set's
``ktest-webhooks-*`` and an operator's ``ktest-operator-*`` counted apart, as are
``kubectl port-forward`` processes), Unix sockets,
ports that were listening during the run and still are, files with PEM keys
or certificates, ``ktest up`` and kind records, and for kind the Docker containers of
every cluster the run recorded and Docker networks that were not there before
(kind's own shared ``kind`` network excepted: kind creates it once and never removes
it). The exit status is 1 when any run
leaked or hung. ``--quick`` runs a small subset (``make test`` uses it
through tests/hardening/test_soak.py); a release check runs ``--runs 8``
(200 runs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

MARK = "KTEST_SOAK_RUN"
KEY_MARKERS = (b"PRIVATE KEY", b"BEGIN CERTIFICATE")
SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}
POINTS = ("start", "test", "teardown")
EXIT_TIMEOUT = 90.0
PYTEST_OUTPUT = "pytest-output.log"  # in the marks directory, which the leak count skips
SETTLE_TIMEOUT = 30.0
# A kind cluster takes 20-40 s to create on a quiet machine (minutes on a loaded one) and
# a few seconds to delete, by ktest or by the janitor of a killed run.
KIND_EXIT_TIMEOUT = 420.0
KIND_SETTLE_TIMEOUT = 180.0
CLUSTER_LABEL = "io.x-k8s.kind.cluster"  # on every kind node container
KIND_NETWORK = "kind"  # kind's shared network: created once by kind, never removed by it

TEST_FILE = """
import os, pathlib, time

def _idle(context):
    context.ready()
    context.stop.wait()


def test_soak(cluster, webhooks, request):
    from ktest.operators import run_callable
    from ktest.webhooks import Handlers

    handlers = Handlers()

    @handlers.validate("", "v1", "configmaps")
    def allow(request):
        return None

    # a webhook set: its serving key in TMPDIR while the test runs (an existing cluster's API
    # server reaches this machine at the address given: the soak's cluster is local)
    host = {"host": "127.0.0.1"} if os.environ.get("KTEST_BACKEND") == "existing" else {}
    webhooks(handlers=handlers, **host)
    with run_callable(_idle, cluster, name="soak"), _forwarded(request):  # an operator: its log dir
        _body(cluster)


def _forwarded(request):
    # kind: a kubectl port-forward to CoreDNS's readiness port, held while the body runs
    import contextlib
    if os.environ.get("KTEST_BACKEND") != "kind":
        return contextlib.nullcontext()
    kind = request.getfixturevalue("kind")
    return kind.port_forward("deployment/coredns", 8181, namespace="kube-system")


def _body(cluster):
    from ktest import eventually
    name = "soak-" + os.environ["KTEST_SOAK_RUN"]
    cluster.apply({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "default"}, "data": {"a": "1"}})
    eventually(lambda: cluster.get(("v1", "ConfigMap", name, "default"))["data"]["a"] == "1")
    cluster.resource("v1", "ConfigMap")  # the dynamic client (its discovery cache is a scratch directory)
    marks = pathlib.Path(os.environ["SOAK_MARKS"])
    (marks / "test").touch()
    if os.environ["SOAK_HOLD"] == "test":
        while True:  # held here until the soak's signal arrives
            time.sleep(0.05)
    assert os.environ["SOAK_ENDING"] != "fail", "this run is meant to fail"
"""

CONFTEST = """
import os, pathlib
import pytest

@pytest.fixture(scope="session", autouse=True)
def _soak_teardown_mark():
    yield
    # session teardown starts: ktest's own teardown (namespaces, control plane) follows
    (pathlib.Path(os.environ["SOAK_MARKS"]) / "teardown").touch()
"""


@dataclass(frozen=True)
class Scenario:
    backend: str
    ending: str  # pass, fail, sigint, sigterm, sigkill, daemon-sigkill, daemon-sigterm
    point: str = ""  # start, test, teardown (for signals)

    @property
    def name(self) -> str:
        return f"{self.backend}:{self.ending}" + (f"@{self.point}" if self.point else "")


@dataclass
class Outcome:
    scenario: str
    seconds: float
    exit_status: int | None
    hung: bool = False
    leaks: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    swept_at_next_start: list[str] = field(default_factory=list)
    bad_exit: bool = False  # a Ctrl-C that ended the run with exit status 0

    @property
    def leaked(self) -> int:
        return sum(len(found) for found in self.leaks.values())


def scenarios(backends: list[str], quick: bool, only: str = "") -> list[Scenario]:
    if only:
        return [s for s in scenarios(backends, False) if s.name == only]
    if quick:
        chosen = [
            Scenario("bare", "pass"),
            Scenario("bare", "fail"),
            Scenario("bare", "sigkill", "test"),
            Scenario("bare", "sigterm", "start"),
            Scenario("bare", "sigint", "teardown"),
            Scenario("reuse", "sigkill", "test"),
            Scenario("reuse", "daemon-sigkill", "test"),
            Scenario("existing", "sigkill", "test"),
            Scenario("existing", "sigkill", "teardown"),
        ]
        return [s for s in chosen if s.backend in backends]
    found = []
    for backend in backends:
        found += [Scenario(backend, "pass"), Scenario(backend, "fail")]
        found += [Scenario(backend, ending, point) for ending in SIGNALS for point in POINTS]
        if backend == "reuse":
            found += [
                Scenario(backend, "daemon-sigkill", "start"),
                Scenario(backend, "daemon-sigkill", "test"),
                Scenario(backend, "daemon-sigterm", "test"),
            ]
    return found


# ------------------------------------------------------------------ observing processes


def _as_a_terminal_job() -> None:
    """In the child before exec: Ctrl-C works in a terminal's job even when the soak itself was
    started with SIGINT ignored (as ``cmd &`` in a non-interactive shell starts it); Python then
    installs its KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as error:
        return f"(cannot read {path}: {error})"


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _state(pid: int) -> str:
    try:
        stat_text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "X"
    return stat_text[stat_text.rindex(")") + 2 :].split()[0]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def marked_processes(run_id: str) -> list[tuple[int, str]]:
    """Live processes carrying the run's mark in their environment."""
    needle = f"{MARK}={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid() or _state(int(entry)) in ("Z", "X"):
            continue
        if _environ_has(int(entry), needle):
            found.append((int(entry), _cmdline(int(entry))[:200]))
    return found


def listening_ports() -> set[int]:
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def ports_of(run_id: str) -> set[int]:
    """Ports named on the command lines of the run's control-plane processes."""
    ports = set()
    for _pid, command in marked_processes(run_id):
        for argument in command.split():
            for prefix in ("--secure-port=", "--listen-client-urls=", "--listen-peer-urls="):
                if argument.startswith(prefix):
                    text = argument[len(prefix) :].rsplit(":", 1)[-1]
                    if text.isdigit() and int(text):
                        ports.add(int(text))
    return ports


def docker_state(clusters: set[str]) -> tuple[list[str], set[str]]:
    """The node containers (any state) of the kind ``clusters``, and every Docker network's name."""
    from ktest.backends.kind.engine import connect

    client = connect(check_runtime=False)
    try:
        containers = [
            f"{container.name} ({container.status})"
            for name in sorted(clusters)
            for container in client.containers.list(all=True, filters={"label": f"{CLUSTER_LABEL}={name}"})
        ]
        return containers, {network.name for network in client.networks.list()}
    finally:
        client.close()


def wait_for(condition: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


# ------------------------------------------------------------------ backend existing


class UserCluster:
    """The "existing cluster" of backend ``existing`` runs: a control plane with the namespace
    controller (so deleted namespaces really go), started once by the soak, in no sandbox."""

    def __init__(self, base: Path) -> None:
        from ktest.controlplane import ControlPlane

        self.plane = ControlPlane(controllers="namespace", root_directory=base)
        self.plane.start()
        self.kubeconfig = str(self.plane.kubeconfig)
        import yaml

        self.context = str(yaml.safe_load(self.plane.kubeconfig.read_text())["current-context"])
        from ktest.cluster import Cluster

        self.admin = Cluster(self.plane.kubeconfig)

    def env(self) -> dict[str, str]:
        return {
            "KTEST_BACKEND": "existing", "KTEST_KUBECONFIG": self.kubeconfig, "KTEST_CONTEXT": self.context
        }

    def down_args(self) -> list[str]:
        return ["down", "--backend", "existing", "--kubeconfig", self.kubeconfig, "--context", self.context]

    def test_namespaces(self) -> dict[str, bool]:
        """ktest's namespaces there now: name -> being deleted."""
        found = self.admin.list("v1", "Namespace", label_selector="app.kubernetes.io/managed-by=ktest")
        return {item["metadata"]["name"]: bool(item["metadata"].get("deletionTimestamp")) for item in found}

    def close(self) -> None:
        self.admin.close()
        self.plane.stop()


# ------------------------------------------------------------------ the sandbox


class Sandbox:
    """Private TMPDIR, run directory and state directory for one run."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.root = root
        self.run_id = run_id
        self.tmp = root / "tmp"
        self.run = root / "run"
        self.state = root / "state"
        self.project = root / "project"
        self.marks = root / "marks"
        for directory in (self.tmp, self.run, self.state, self.project, self.marks):
            directory.mkdir(parents=True)
        (self.project / "test_soak.py").write_text(TEST_FILE)
        (self.project / "conftest.py").write_text(CONFTEST)
        (self.project / "pytest.ini").write_text("[pytest]\n")

    def env(
        self, ending: str, hold: str, backend: str = "", user_cluster: UserCluster | None = None
    ) -> dict[str, str]:
        env = dict(os.environ)
        for variable in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "KTEST_REUSE", "KTEST_BACKEND"):
            env.pop(variable, None)
        if backend == "kind":
            env["KTEST_BACKEND"] = "kind"
        if backend == "existing" and user_cluster is not None:
            env.update(user_cluster.env())
        env.update(
            {
                MARK: self.run_id,
                "TMPDIR": str(self.tmp),
                "KTEST_RUN_DIR": str(self.run),
                "XDG_STATE_HOME": str(self.state),
                "SOAK_MARKS": str(self.marks),
                "SOAK_ENDING": ending,
                "SOAK_HOLD": hold,
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        return env

    @property
    def kind_records(self) -> Path:
        return self.state / "ktest" / "kind"

    def kind_names(self) -> set[str]:
        """The kind clusters recorded in this sandbox now (ktest records one before creating it)."""
        return {path.stem for path in self.kind_records.glob("ktest-*.json")}

    def leaks(
        self,
        seen_ports: set[int],
        kind_clusters: set[str] = frozenset(),
        networks: set[str] | None = None,
        user_cluster: UserCluster | None = None,
        namespaces_before: frozenset[str] = frozenset(),
    ) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {
            "processes": [f"{pid} {command}" for pid, command in marked_processes(self.run_id)],
            "directories": [],
            "webhook-dirs": [],
            "operator-logs": [],
            "proxy-dirs": [],
            "files": [],
            "sockets": [],
            "ports": sorted(str(port) for port in seen_ports & listening_ports()),
            "credentials": [],
            "records": [str(p) for p in (self.state / "ktest" / "up").glob("*.json")],
            "kind-records": [str(p) for p in self.kind_records.glob("*.json")],
        }
        if kind_clusters or networks is not None:
            containers, network_names = docker_state(kind_clusters)
            found["kind-containers"] = containers
            found["docker-networks"] = sorted(network_names - (networks or set()) - {KIND_NETWORK})
        if user_cluster is not None:  # the run's test namespaces not gone nor being deleted
            found["namespaces"] = sorted(
                name for name, deleting in user_cluster.test_namespaces().items()
                if name not in namespaces_before and not deleting
            )
        for base in (self.tmp, self.run):
            for entry in sorted(base.iterdir()):
                found[_kind_of_entry(entry)].append(str(entry))
        for pid_command in list(found["processes"]):
            if "port-forward" in pid_command:  # kind: kubectl port-forward of KindHandle
                found["processes"].remove(pid_command)
                found.setdefault("port-forwards", []).append(pid_command)
        for path in _walk(self.root, skip=(self.project, self.marks)):
            try:
                mode = path.lstat().st_mode
            except OSError:
                continue
            if stat.S_ISSOCK(mode):
                found["sockets"].append(str(path))
            elif stat.S_ISREG(mode) and _has_key_material(path):
                found["credentials"].append(str(path))
        return {kind: items for kind, items in found.items() if items}


# What a leftover in TMPDIR or the run directory is, by its name (issue 23.5 counts them apart).
ENTRY_KINDS = (
    ("ktest-webhooks-", "webhook-dirs"),
    ("ktest-operator-", "operator-logs"),
    ("ktest-proxy-", "proxy-dirs"),
)


def _kind_of_entry(entry: Path) -> str:
    for prefix, kind in ENTRY_KINDS:
        if entry.name.startswith(prefix):
            return kind
    return "directories" if entry.is_dir() else "files"


def _walk(root: Path, skip: tuple[Path, ...]) -> Iterator[Path]:
    for directory, subdirectories, files in os.walk(root):
        if any(Path(directory) == s or s in Path(directory).parents for s in skip):
            subdirectories.clear()
            continue
        for name in files + subdirectories:
            yield Path(directory) / name


def _has_key_material(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return any(marker in data for marker in KEY_MARKERS)


# ------------------------------------------------------------------ one run


class Run:
    def __init__(
        self,
        scenario: Scenario,
        sandbox: Sandbox,
        rng: random.Random,
        user_cluster: UserCluster | None = None,
    ) -> None:
        self.user_cluster = user_cluster
        self.scenario = scenario
        self.sandbox = sandbox
        self.rng = rng
        self.notes: list[str] = []
        self.seen_ports: set[int] = set()
        self._ports_scanned = 0.0
        self.hung = False
        self.signalled = False  # the signal reached the pytest process
        self.kind_clusters: set[str] = set()  # every kind cluster the run recorded
        self.kind = scenario.backend == "kind"
        self.exit_timeout = KIND_EXIT_TIMEOUT if self.kind else EXIT_TIMEOUT

    # -- helpers
    def _ktest(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ktest", *args],
            env=self.sandbox.env("pass", ""),
            cwd=self.sandbox.project,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def _record(self) -> dict[str, object] | None:
        try:
            data = json.loads((self.sandbox.state / "ktest" / "up" / "default.json").read_text())
            return data if isinstance(data, dict) else None
        except (OSError, ValueError):
            return None

    def _remember_ports(self, force: bool = False) -> None:
        """Note the run's ports (a /proc scan: at most twice a second unless forced, it is not free)."""
        if self.kind:
            self.kind_clusters |= self.sandbox.kind_names()
        now = time.monotonic()
        if not force and now - self._ports_scanned < 0.5:
            return
        self._ports_scanned = now
        self.seen_ports |= ports_of(self.sandbox.run_id)

    def _wait_point(self, point: str, process: subprocess.Popen[bytes] | None, timeout: float = 120) -> bool:
        """Until the run reaches ``point`` (False if it ended first)."""
        marks = self.sandbox.marks

        def reached() -> bool:
            self._remember_ports()
            if point == "start" and self.kind:
                return bool(self.kind_clusters)  # recorded: `kind create` runs
            if point == "start" and self.user_cluster is not None:
                return any(self.sandbox.run.glob("ktest-kubeconfig-*"))  # the context's private copy
            if point == "start":
                return any(self.sandbox.run.glob("ktest-cp-*"))
            return (marks / point).exists()

        def ended() -> bool:
            return process is not None and process.poll() is not None

        timeout = max(timeout, self.exit_timeout) if self.kind else timeout
        return wait_for(lambda: reached() or ended(), timeout) and reached()

    def _end(self, process: subprocess.Popen[bytes]) -> int | None:
        try:
            return process.wait(self.exit_timeout)
        except subprocess.TimeoutExpired:
            self.hung = True
            # SIGABRT first: pytest's faulthandler prints every thread's stack, which says where
            # it hung; the tail of its output goes into the notes.
            process.send_signal(signal.SIGABRT)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            self.notes.append(
                f"pytest did not exit within {self.exit_timeout:.0f} s; aborted it. Its output ends:\n"
                + _tail(self.sandbox.marks / PYTEST_OUTPUT, 60)
            )
            return process.returncode

    # -- the run
    def pytest(self, ending: str, hold: str, extra: list[str]) -> subprocess.Popen[bytes]:
        with (self.sandbox.marks / PYTEST_OUTPUT).open("ab") as output:
            return subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *extra],
                env=self.sandbox.env(ending, hold, self.scenario.backend, self.user_cluster),
                cwd=self.sandbox.project,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, as a terminal's foreground job
                preexec_fn=_as_a_terminal_job,
            )

    def signal(self, process: subprocess.Popen[bytes], ending: str) -> None:
        signum = SIGNALS[ending]
        try:
            if ending == "sigint":
                os.killpg(process.pid, signum)  # Ctrl-C reaches the whole foreground group
            else:
                os.kill(process.pid, signum)
            self.signalled = True
        except ProcessLookupError:
            self.notes.append("the process had already exited when the signal was due")

    def run_pytest(self, extra: list[str]) -> int | None:
        scenario = self.scenario
        ending = scenario.ending
        hold = "test" if ending in SIGNALS and scenario.point == "test" else ""
        process = self.pytest(ending, hold, extra)
        if ending in SIGNALS:
            if self._wait_point(scenario.point, process):
                if scenario.point == "start" and self.kind:
                    time.sleep(self.rng.uniform(0.5, 15))  # anywhere in `kind create` (20-40 s)
                elif scenario.point == "start":
                    time.sleep(self.rng.uniform(0, 0.8))  # anywhere in the start, not only its first ms
                self.signal(process, ending)
            else:
                self.notes.append(f"the run ended before reaching {scenario.point}")
        else:
            self._wait_point("test", process)
        return self._end(process)

    def run_bare(self) -> int | None:
        """Backends bare and kind: a session that starts (and ends) its own cluster."""
        return self.run_pytest([])

    def run_reuse(self) -> int | None:
        scenario = self.scenario
        status: int | None
        if scenario.ending.startswith("daemon-"):
            status = self._daemon_scenario()
        else:
            up = self._ktest("up", "--timeout", "120")
            if up.returncode != 0:
                self.notes.append(f"ktest up failed: {up.stderr[-500:]}")
            self._remember_ports(force=True)
            status = self.run_pytest(["--ktest-reuse"])
        self._down(expect_running=not scenario.ending.startswith("daemon-"))
        return status

    def _daemon_pid(self) -> int | None:
        record = self._record()
        return int(str(record["pid"])) if record else None

    def _daemon_scenario(self) -> int | None:
        scenario = self.scenario
        signum = signal.SIGKILL if scenario.ending == "daemon-sigkill" else signal.SIGTERM
        up = subprocess.Popen(
            [sys.executable, "-m", "ktest", "up", "--timeout", "120"],
            env=self.sandbox.env("pass", ""),
            cwd=self.sandbox.project,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if scenario.point == "start":
                daemon = self._daemon_during_start(up)
                if daemon is not None:
                    os.kill(daemon, signum)
                return up.wait(EXIT_TIMEOUT)
            up.wait(EXIT_TIMEOUT)
            daemon = self._daemon_pid()
            self._remember_ports(force=True)
            process = self.pytest("pass", "test", ["--ktest-reuse"])
            if self._wait_point("test", process) and daemon is not None:
                os.kill(daemon, signum)
            else:
                self.notes.append("the test never ran against the daemon")
            # The held test now waits forever on a dead cluster: end it as a user would.
            wait_for(lambda: daemon is None or _state(daemon) in ("Z", "X"), 30)
            self.signal(process, "sigint")
            return self._end(process)
        finally:
            if up.poll() is None:
                up.kill()
                up.wait()

    def _daemon_during_start(self, up: subprocess.Popen[bytes]) -> int | None:
        found: list[int] = []

        def daemon_started() -> bool:
            for pid, command in marked_processes(self.sandbox.run_id):
                if "ktest.backends.bare.daemon" in command:
                    found.append(pid)
                    return any(self.sandbox.run.glob("ktest-cp-*"))
            return up.poll() is not None

        wait_for(daemon_started, 120, interval=0.1)
        time.sleep(self.rng.uniform(0, 0.8))
        if not found:
            self.notes.append("no daemon process seen during start")
        return found[-1] if found else None

    def _down(self, expect_running: bool) -> None:
        record = self._record()
        down = self._ktest("down")
        said_stopped = "stopped" in down.stderr and "was not running" not in down.stderr
        if record is not None and said_stopped and not expect_running:
            self.notes.append(f"LIE: ktest down said {down.stderr.strip()!r} for a dead daemon")
            self.hung = True  # counted as a failure of the run


def run_one(
    scenario: Scenario,
    base: Path,
    index: int,
    seed: int,
    networks: set[str] | None = None,
    user_cluster: UserCluster | None = None,
) -> Outcome:
    """One run; ``networks``: the Docker networks before the soak (kind runs count new ones);
    ``user_cluster``: the cluster of backend ``existing`` runs."""
    run_id = f"{os.getpid()}-{index}"
    root = Path(tempfile.mkdtemp(prefix=f"run-{index}-", dir=base))
    sandbox = Sandbox(root, run_id)
    existing = user_cluster if scenario.backend == "existing" else None
    run = Run(scenario, sandbox, random.Random(seed + index), existing)
    before = frozenset(existing.test_namespaces()) if existing is not None else frozenset()
    began = time.monotonic()
    status = run.run_reuse() if scenario.backend == "reuse" else run.run_bare()
    settle = KIND_SETTLE_TIMEOUT if run.kind else SETTLE_TIMEOUT
    settled = wait_for(lambda: not marked_processes(run_id), settle, interval=0.25)
    if not settled:
        run.notes.append(f"processes still alive {settle:.0f} s after the run ended")
    run._remember_ports(force=True)

    def count() -> dict[str, list[str]]:
        if run.kind:
            return sandbox.leaks(run.seen_ports, run.kind_clusters, networks or set())
        return sandbox.leaks(run.seen_ports, user_cluster=existing, namespaces_before=before)

    left = count()
    if left:  # what the next start sweeps (owner dead): `ktest down` sweeps the same way
        run._ktest("down", "--all")
        if run.kind:
            run._ktest("down", "--kind", timeout=300)
        if existing is not None:
            swept = run._ktest(*existing.down_args())
            if swept.returncode != 0:
                run.notes.append(f"ktest down --backend existing failed: {swept.stderr[-500:]}")
    leaks = count()
    swept = sorted(
        {item for items in left.values() for item in items} - {i for v in leaks.values() for i in v}
    )
    bad_exit = scenario.ending == "sigint" and run.signalled and status == 0
    if bad_exit:
        run.notes.append("Ctrl-C, and the run ended with exit status 0 (as if it had passed)")
    outcome = Outcome(
        scenario.name, round(time.monotonic() - began, 1), status, run.hung, leaks, run.notes, swept, bad_exit
    )
    for pid, _command in marked_processes(run_id):  # never leave a leak running
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1, help="repetitions of every scenario")
    parser.add_argument("--backends", default="bare,reuse")
    parser.add_argument("--quick", action="store_true", help="a small subset (for make test)")
    parser.add_argument("--only", default="", help="one scenario, e.g. bare:sigkill@test")
    parser.add_argument(
        "--controllers",
        default=None,
        help="KTEST_CONTROLLERS for the runs (e.g. none: faster, no kube-controller-manager)",
    )
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    args = parser.parse_args(argv)

    if args.controllers is not None:
        os.environ["KTEST_CONTROLLERS"] = args.controllers  # inherited by every run (and `ktest up`)
    chosen = scenarios([b.strip() for b in args.backends.split(",") if b.strip()], args.quick, args.only)
    networks = docker_state(set())[1] if any(s.backend == "kind" for s in chosen) else None
    base = Path(tempfile.mkdtemp(prefix="ktest-soak-"))
    outcomes: list[Outcome] = []
    index = 0
    user_cluster: UserCluster | None = None
    try:
        if any(s.backend == "existing" for s in chosen):
            (base / "user-cluster").mkdir()
            user_cluster = UserCluster(base / "user-cluster")
        for _repetition in range(args.runs):
            for scenario in chosen:
                index += 1
                outcome = run_one(scenario, base, index, args.seed, networks, user_cluster)
                outcomes.append(outcome)
                if not args.json:
                    verdict = "LEAK" if outcome.leaked else ("HUNG" if outcome.hung else "ok")
                    verdict = "EXIT" if outcome.bad_exit and verdict == "ok" else verdict
                    swept = f"swept at next start: {len(outcome.swept_at_next_start)}"
                    print(
                        f"{index:4d} {scenario.name:32s} {verdict:4s} {outcome.seconds:6.1f}s "
                        f"exit={outcome.exit_status} {swept} {outcome.leaks or ''} "
                        f"{'; '.join(outcome.notes)}",
                        flush=True,
                    )
    finally:
        if user_cluster is not None:
            user_cluster.close()
        shutil.rmtree(base, ignore_errors=True)
    leaked_runs = [o for o in outcomes if o.leaked]
    hung_runs = [o for o in outcomes if o.hung]
    bad_exits = [o for o in outcomes if o.bad_exit]
    totals: dict[str, int] = {}
    for outcome in outcomes:
        for kind, items in outcome.leaks.items():
            totals[kind] = totals.get(kind, 0) + len(items)
    summary = {
        "runs": len(outcomes),
        "leaked_runs": len(leaked_runs),
        "hung_runs": len(hung_runs),
        "bad_exit_runs": len(bad_exits),
        "leaks": totals,
        "swept_at_next_start": sum(len(o.swept_at_next_start) for o in outcomes),
    }
    if args.json:
        print(json.dumps({"summary": summary, "outcomes": [asdict(o) for o in outcomes]}, indent=1))
    else:
        print(
            f"soak: {summary['runs']} runs, {len(leaked_runs)} leaked, {len(hung_runs)} hung, "
            f"{len(bad_exits)} Ctrl-C runs exited 0; "
            f"leaks by kind: {totals or 'none'}; left for the next start to sweep "
            f"(owner dead): {summary['swept_at_next_start']}"
        )
    return 1 if leaked_runs or hung_runs or bad_exits else 0


if __name__ == "__main__":
    raise SystemExit(main())
