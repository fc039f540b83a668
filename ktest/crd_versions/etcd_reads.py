"""Read what etcd really holds, not what the API server answers (which converts every object to
the version asked for, so it cannot show the version an object is *stored* in).

On the bare backend ktest owns etcd: it reads through etcd's JSON gateway (``POST /v3/kv/range``)
with the API server's own etcd client certificate, found on its command line. Custom resources
are stored as JSON under ``<prefix>/<group>/<plural>/[<namespace>/]<name>``.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ktest.errors import ControlPlaneError

if TYPE_CHECKING:
    from ktest.controlplane.plane import ControlPlane

DEFAULT_PREFIX = "/registry"
_TIMEOUT = 10.0


@dataclass(frozen=True)
class EtcdReader:
    """Reads keys of one etcd (read-only: only ``/v3/kv/range`` is ever called)."""

    host: str
    port: int
    ca_file: str
    cert_file: str
    key_file: str
    prefix: str = DEFAULT_PREFIX

    @classmethod
    def of(cls, plane: ControlPlane) -> EtcdReader:
        """The reader of ``plane``'s etcd, with the credentials its API server uses."""
        apiserver = plane.processes().get("kube-apiserver")
        if apiserver is None:
            raise ControlPlaneError(f"{plane!r} runs no kube-apiserver: start it before reading its etcd")
        return cls.from_apiserver_flags(apiserver.command)

    @classmethod
    def from_apiserver_flags(cls, command: Sequence[str]) -> EtcdReader:
        """The reader for the etcd a kube-apiserver command line points at."""
        flags = _flags(command)
        needed = ("etcd-servers", "etcd-cafile", "etcd-certfile", "etcd-keyfile")
        missing = [name for name in needed if not flags.get(name)]
        if missing:
            raise ControlPlaneError(
                "cannot find the API server's etcd: its command line lacks "
                + ", ".join(f"--{name}" for name in missing)
            )
        url = urlsplit(flags["etcd-servers"].split(",")[0])
        if url.scheme != "https" or url.hostname is None or url.port is None:
            raise ControlPlaneError(
                f"unexpected --etcd-servers {flags['etcd-servers']!r} (want https://host:port)"
            )
        return cls(
            url.hostname,
            url.port,
            flags["etcd-cafile"],
            flags["etcd-certfile"],
            flags["etcd-keyfile"],
            (flags.get("etcd-prefix") or DEFAULT_PREFIX).rstrip("/"),
        )

    def get(self, key: str) -> bytes | None:
        """The value of ``key`` (the prefix not included), or None when etcd holds no such key."""
        found = self._range({"key": _b64(self.prefix + key)})
        return found[0][1] if found else None

    def scan(self, key_prefix: str) -> list[tuple[str, bytes]]:
        """Every (key without the prefix, value) whose key starts with ``key_prefix``."""
        start = (self.prefix + key_prefix).encode()
        return [
            (key.removeprefix(self.prefix), value)
            for key, value in self._range({"key": _b64(start), "range_end": _b64(_prefix_end(start))})
        ]

    def _range(self, body: Mapping[str, Any]) -> list[tuple[str, bytes]]:
        context = ssl.create_default_context(cafile=self.ca_file)
        context.load_cert_chain(self.cert_file, self.key_file)
        connection = http.client.HTTPSConnection(self.host, self.port, timeout=_TIMEOUT, context=context)
        try:
            connection.request(
                "POST", "/v3/kv/range", body=json.dumps(body), headers={"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            text = response.read()
        except (OSError, ssl.SSLError, http.client.HTTPException) as error:
            raise ControlPlaneError(f"cannot read etcd at https://{self.host}:{self.port}: {error}") from None
        finally:
            connection.close()
        if response.status != 200:
            raise ControlPlaneError(
                f"etcd at https://{self.host}:{self.port} answered {response.status} to a range read: "
                f"{text[:300]!r}"
            )
        answer = json.loads(text)
        return [
            (base64.b64decode(kv["key"]).decode(), base64.b64decode(kv.get("value", "")))
            for kv in answer.get("kvs") or ()
        ]


def custom_resource_key(group: str, plural: str, namespace: str | None, name: str | None = None) -> str:
    """Where the API server stores a custom resource (or, without ``name``, the kind's objects
    in ``namespace``, or everywhere without either), below the prefix."""
    key = f"/{group}/{plural}/"
    if namespace:
        key += f"{namespace}/"
    if name is not None:
        key += name
    return key


def _flags(command: Sequence[str]) -> dict[str, str]:
    pairs = (argument[2:].partition("=") for argument in command if argument.startswith("--"))
    return {name: value for name, equals, value in pairs if equals}


def _b64(value: str | bytes) -> str:
    return base64.b64encode(value.encode() if isinstance(value, str) else value).decode()


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest key after every key starting with ``prefix`` (etcd's range_end for a prefix)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"
