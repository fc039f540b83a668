"""``kubectl`` bound to one cluster, and ``kubectl port-forward`` as a context manager.

kubectl is found without a download: ``KTEST_KUBECTL``, then the ktest
binaries of the cluster's version, then any cached ktest kubectl (kubectl
supports one minor of skew either way), then PATH, and only then the usual
resolution (which may build the binaries from Go modules).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from ktest.base.process import end_popen
from ktest.errors import KindError

_FORWARDING = re.compile(r"Forwarding from (?:\[[^\]]*\]|[^\s\[]+):(\d+) ->")
PORT_FORWARD_TIMEOUT = 30.0


def find_kubectl(version: str) -> Path:
    """A kubectl usable against a cluster of Kubernetes ``version``."""
    explicit = os.environ.get("KTEST_KUBECTL")
    if explicit:
        path = Path(explicit).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise KindError(
                f"KTEST_KUBECTL={explicit} is not an executable file; point it at kubectl or unset it"
            )
        return path
    from ktest.assets import store

    locations = store.Locations.from_env()
    exact = locations.cache_entry(version) / "kubectl"
    if exact.is_file():
        return exact
    minor = _minor_number(version)
    for entry in store.list_cache_entries(locations):
        near = entry.directory / "kubectl"
        if near.is_file() and abs(_minor_number(entry.version) - minor) <= 1:
            return near
    on_path = shutil.which("kubectl")
    if on_path:
        return Path(on_path)
    from ktest.assets import resolve_assets

    return resolve_assets(version).binary("kubectl")


def _minor_number(version: str) -> int:
    from ktest.assets.selectors import KubeVersion
    from ktest.errors import AssetsError

    try:
        return KubeVersion.parse(version).minor
    except AssetsError:
        return -100


class Kubectl:
    """Runs kubectl with one kubeconfig: ``kubectl("get", "pods", "-A")`` returns stdout."""

    def __init__(self, binary: Path, kubeconfig: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig

    def command(self, *args: str) -> list[str]:
        return [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args]

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120.0) -> str:
        try:
            finished = subprocess.run(
                self.command(*args),
                input=input,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as error:
            raise KindError(f"`kubectl {' '.join(args)}` did not finish in {timeout:.0f}s") from error
        if finished.returncode != 0:
            raise KindError(
                f"`kubectl {' '.join(args)}` exited with {finished.returncode}: "
                f"{finished.stderr.strip() or finished.stdout.strip()}"
            )
        return finished.stdout

    @contextlib.contextmanager
    def port_forward(
        self, target: str, port: int, *, namespace: str | None = None, timeout: float = PORT_FORWARD_TIMEOUT
    ) -> Iterator[int]:
        """Forward a free local port to ``port`` of ``target`` (``pod/x``, ``svc/y``, ``deploy/z``).

        Yields the local port once kubectl says it is forwarding; the forwarder
        is stopped on exit. Raises KindError with kubectl's own words if it
        cannot forward (target missing, not running, wrong port).
        """
        args = ["port-forward", "--address", "127.0.0.1", target, f":{port}"]
        if namespace:
            args[1:1] = ["--namespace", namespace]
        from ktest.base.process import popen_bound  # killed with this process, even by kill -9

        process = popen_bound(
            self.command(*args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            yield _wait_forwarding(process, timeout, f"{target}:{port}")
        finally:
            stop_forwarding(process)


def forwarded_port(process: subprocess.Popen[str], timeout: float, what: str) -> tuple[int | None, str]:
    """The local port ``kubectl port-forward`` reports (a reader thread keeps draining its
    output), or None with the last lines of its output when it exits or times out first."""
    found: list[int] = []
    seen: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line.rstrip())
            match = _FORWARDING.search(line)
            if match and not found:
                found.append(int(match.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=read, name=f"port-forward {what}", daemon=True).start()
    if not ready.wait(timeout):
        return None, f"no forwarding after {timeout:.0f}s: " + ("\n".join(seen[-10:]) or "(no output)")
    return (found[0] if found else None), "\n".join(seen[-10:]) or "(no output)"


def stop_forwarding(process: subprocess.Popen[str]) -> None:
    """End a port-forward: SIGTERM, then SIGKILL after 10 s; close its output."""
    end_popen(process, 10)
    if process.stdout is not None:
        process.stdout.close()


def _wait_forwarding(process: subprocess.Popen[str], timeout: float, what: str) -> int:
    port, output = forwarded_port(process, timeout, what)
    if port is not None:
        return port
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(2)  # its output ended: it is exiting (or it still runs: it never forwarded)
    if process.poll() is None:
        raise KindError(f"kubectl port-forward to {what} did not start in {timeout:.0f}s:\n{output}")
    raise KindError(f"kubectl port-forward to {what} failed:\n{output}")
