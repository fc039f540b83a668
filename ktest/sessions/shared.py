"""One cluster for several processes: a server in the process that holds it, a client in each worker.

pytest-xdist's controller (or the ``ktest up`` daemon) holds the control plane: one API
server is cheaper than one per worker. The first worker that needs the cluster asks on a
Unix socket; the server opens the backend once and answers every worker with the same
:class:`ClusterShare`, or with the error that happened. Requests (one line): ``share``,
``restart-controllers`` (CRDs a worker installed are new kinds for the holder's garbage
collector), ``dead-components``.

The socket lives in a private ``ktest-share-*`` directory with a holder file: if the holder
is killed, the next :class:`ClusterServer` or ``ktest down`` removes it (:func:`sweep_stale_shares`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ktest import errors
from ktest.base import holders
from ktest.base.bounded import join_thread
from ktest.sessions.backend import Backend, ClusterShare

SHARE_PREFIX = "ktest-share-"
SERVER_STOP_TIMEOUT = 600.0
"""Seconds closing waits for the server's thread (a cluster start in progress for a worker)."""

_ERROR_TYPES: dict[str, type[errors.KtestError]] = {
    cls.__name__: cls
    for cls in (
        errors.AssetsError,
        errors.ControlPlaneError,
        errors.ClusterError,
        errors.ManifestError,
        errors.CRDError,
        errors.ConfigError,
        errors.KindError,
    )
}


class ClusterServer:
    """Opens a backend on the first request and serves its share to every client."""

    def __init__(self, open_backend: Callable[[], Backend]) -> None:
        self._open_backend = open_backend
        self._directory = holders.held_directory(SHARE_PREFIX, unheld_is_dead=_socket_refuses)
        self.address = str(self._directory / "socket")
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(self.address)
        os.chmod(self.address, 0o600)  # bind() gives the umask's mode; the directory is 0700 too
        self._socket.listen(64)
        self._backend: Backend | None = None
        self._answer: dict[str, Any] | None = None
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="ktest-cluster-server", daemon=True)
        self._thread.start()

    @property
    def backend(self) -> Backend | None:
        """The backend once a client asked for it."""
        return self._backend

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            with connection:
                if self._closing:
                    return
                connection.settimeout(5)
                request = _read_line(connection, partial_on_error=True).decode(errors="replace").strip()
                if request == "restart-controllers":
                    answer = self._restart_controllers()
                elif request == "dead-components":
                    answer = self._dead_components()
                else:
                    answer = self._get_answer()
                with contextlib.suppress(OSError):  # the worker died meanwhile
                    connection.sendall(json.dumps(answer).encode() + b"\n")

    def open(self) -> ClusterShare:
        """Open the backend now rather than on the first request; its share (with this address)."""
        answer = self._get_answer()
        _raise_if_error(answer)
        return ClusterShare.from_json(answer["share"])

    def _get_answer(self) -> dict[str, Any]:
        if self._answer is None:
            try:
                self._backend = self._open_backend()
                self._backend.until_ready()  # workers get a cluster whose every part runs
                share = dataclasses.replace(self._backend.share(), control_address=self.address)
                self._answer = {"share": share.to_json()}
            except Exception as error:
                self._answer = {"error": str(error), "type": type(error).__name__}
        return self._answer

    def _restart_controllers(self) -> dict[str, Any]:
        plane = self._backend.control_plane if self._backend is not None else None
        if plane is None:
            return {"restarted": False}
        try:
            plane.restart_controllers()
        except Exception as error:
            return {"error": str(error), "type": type(error).__name__}
        return {"restarted": True}

    def _dead_components(self) -> dict[str, Any]:
        """The backend's own view: after a controller restart, the pids a share holds are stale."""
        backend = self._backend
        return {"dead": backend.dead_components() if backend is not None else []}

    def close(self) -> None:
        """Stop serving (waiting for a start in progress), then close the backend."""
        self._closing = True
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as wake:
            wake.connect(self.address)
        what = "the xdist workers' cluster server (a start in progress)"
        join_thread(self._thread, SERVER_STOP_TIMEOUT, what, errors.KtestError)
        self._socket.close()
        shutil.rmtree(self._directory, ignore_errors=True)
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()


def sweep_stale_shares(base: Path | None = None) -> list[Path]:
    """Remove ``ktest-share-*`` directories whose holding process is dead."""
    return holders.sweep(Path(base or tempfile.gettempdir()), SHARE_PREFIX, unheld_is_dead=_socket_refuses)


def remove_share_of_dead_holder(address: str | None) -> None:
    """Remove the directory of the socket at ``address`` if its holder is dead."""
    if not address:
        return
    directory = Path(address).parent
    if directory.name.startswith(SHARE_PREFIX) and holders.holder_is_dead(directory, _socket_refuses):
        shutil.rmtree(directory, ignore_errors=True)


def _socket_refuses(directory: Path) -> bool:
    """For a directory without a holder file (older ktest): nobody accepts on its socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(directory / "socket"))
        except OSError:
            return True
    return False


def request_share(address: str) -> ClusterShare:
    """Ask the server at ``address`` for the cluster (blocks while it starts)."""
    return ClusterShare.from_json(_request(address, "share")["share"])


def request_restart_controllers(address: str) -> None:
    """Ask the holding process at ``address`` to restart its controllers (after new CRDs)."""
    _request(address, "restart-controllers")


def request_dead_components(address: str) -> list[tuple[str, str]]:
    """Ask the holding process at ``address`` which components died: (name, log tail) of each."""
    return [(name, tail) for name, tail in _request(address, "dead-components")["dead"]]


def _read_line(connection: socket.socket, *, partial_on_error: bool = False) -> bytes:
    """What the peer sends up to its newline or until it closes the connection; with
    ``partial_on_error``, a failed read (a worker that died) ends the line instead of raising."""
    data = b""
    try:
        while not data.endswith(b"\n"):
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        if not partial_on_error:
            raise
    return data


def _raise_if_error(answer: dict[str, Any], where: str = "") -> None:
    """Raise the error the holding process answered with, as its own ktest error type."""
    if "error" in answer:
        raise _ERROR_TYPES.get(answer.get("type", ""), errors.KtestError)(answer["error"] + where)


def _request(address: str, request: str) -> dict[str, Any]:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(address)
            connection.sendall(request.encode() + b"\n")
            data = _read_line(connection)
    except OSError as error:
        raise errors.ControlPlaneError(
            f"cannot reach the process that holds the test cluster ({address}): {error}; "
            "did the pytest-xdist controller process exit?"
        ) from None
    if not data:
        raise errors.ControlPlaneError(
            "the process that holds the test cluster closed the connection without an answer "
            "(the pytest-xdist controller is shutting down)"
        )
    answer = json.loads(data)
    _raise_if_error(answer, "\n(raised in the process that holds the cluster)")
    return dict(answer)
