"""A private copy of one kubeconfig context whose embedded credentials are files.

The kubernetes Python client writes ``certificate-authority-data``,
``client-certificate-data`` and ``client-key-data`` to files in ``$TMPDIR``
and removes them only at a clean interpreter exit: after SIGTERM or ``kill -9``
the user's key would stay there. For backend ``existing``, ktest writes the
context's cluster and user once into a 0700 directory (on tmpfs when
available) and hands the client that copy; a janitor process removes the
directory even if this process is killed. Its exec credential plugin runs with a time limit
(:mod:`ktest.backends.existing.exec_bound`).
"""

from __future__ import annotations

import base64
import binascii
import copy
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from ktest.backends.existing.exec_bound import bounded_exec
from ktest.base.janitor_client import JanitorHandle
from ktest.base.procfs import write_private_file
from ktest.errors import ConfigError

PREFIX = "ktest-kubeconfig-"
_FILE_FIELDS = {
    "certificate-authority-data": ("certificate-authority", "ca.crt"),
    "client-certificate-data": ("client-certificate", "client.crt"),
    "client-key-data": ("client-key", "client.key"),
}
EXEC_PLUGIN_TIMEOUT = 60.0
"""Seconds an exec credential plugin may take (``aws eks get-token`` takes one or two)."""
_PATH_FIELDS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


class PrivateKubeconfig:
    """``path`` is a kubeconfig with only ``context``, credentials as files; ``close()`` removes it."""

    def __init__(
        self,
        source: Path,
        context: str,
        base: Path | None = None,
        *,
        exec_timeout: float = EXEC_PLUGIN_TIMEOUT,
    ) -> None:
        context_entry, cluster, user = copy.deepcopy(context_entries(load_kubeconfig(source), context))
        _refuse_nul_names(source, context, context_entry, cluster, user)
        self.source, self.context, self.exec_timeout = source, context, exec_timeout
        parent = base or Path(tempfile.gettempdir())
        self.directory = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        self._janitor: JanitorHandle | None = JanitorHandle(self.directory, keep_directory=False)
        try:
            for entry in (cluster, user):
                if entry is not None:
                    self._externalize(entry, source)
            private = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster] if cluster else [],
                "users": [user] if user else [],
                "contexts": [context_entry],
                "current-context": context,
                "preferences": {},
            }
            self.path = self.directory / "kubeconfig"
            write_private_file(self.path, yaml.safe_dump(private, sort_keys=False).encode())
        except BaseException:
            self.close()
            raise

    def _externalize(self, entry: dict[str, Any], source: Path) -> None:
        body = entry.get("cluster") if "cluster" in entry else entry.get("user")
        if not isinstance(body, dict):
            return
        for field, (file_field, file_name) in _FILE_FIELDS.items():
            data = body.pop(field, None)
            if not data:
                continue
            try:
                content = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise ConfigError(
                    f"backend existing: {field} of {entry.get('name')!r} in {source} is not valid base64; "
                    "fix or regenerate that kubeconfig entry"
                ) from None
            # One cluster and one user per copy: fixed names (an entry's name may hold anything).
            target = self.directory / f"{'cluster' if 'cluster' in entry else 'user'}-{file_name}"
            write_private_file(target, content)
            body[file_field] = str(target)
        for field in _PATH_FIELDS:  # relative paths were relative to the original kubeconfig
            value = body.get(field)
            if isinstance(value, str) and value and not os.path.isabs(value):
                body[field] = str((source.parent / value).resolve())
        exec_config = body.get("exec")
        command = exec_config.get("command") if isinstance(exec_config, dict) else None
        # kubectl runs an exec plugin given by a relative path from the kubeconfig's directory.
        if isinstance(exec_config, dict) and isinstance(command, str) and os.sep in command:
            exec_config["command"] = command = str((source.parent / command).resolve())
        if isinstance(exec_config, dict) and isinstance(command, str) and command:
            what = (
                f"the exec credential plugin of user {entry.get('name')!r} in {source} (ktest waited for "
                f"the credentials of context {self.context!r})"
            )
            body["exec"] = bounded_exec(
                exec_config, timeout=self.exec_timeout, what=what, cwd=str(source.parent)
            )

    def close(self) -> None:
        """Remove the copy (idempotent)."""
        shutil.rmtree(self.directory, ignore_errors=True)
        janitor, self._janitor = self._janitor, None
        if janitor is not None:
            janitor.release()


def _refuse_nul_names(source: Path, context: str, *entries: Any) -> None:
    """ConfigError when the context's, its cluster's or its user's name holds a NUL byte."""
    names = [("context", context)] + [
        (kind, entry.get("name"))
        for kind, entry in zip(("context", "cluster", "user"), entries, strict=True)
        if isinstance(entry, dict)
    ]
    for kind, name in names:
        if isinstance(name, str) and "\0" in name:
            raise ConfigError(
                f"backend existing: the {kind} name {name!r} in {source} holds a NUL byte (\\x00), which "
                "no file name, header or client can carry; rename it there (and where the context names it)"
            )


def load_kubeconfig(source: Path) -> dict[str, Any]:
    """The kubeconfig at ``source``; a ConfigError when it cannot be read or is no mapping."""
    try:
        config = yaml.safe_load(source.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"backend existing: cannot read kubeconfig {source}: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"backend existing: {source} is not a kubeconfig (no mapping at the top)")
    return config


def context_entries(config: dict[str, Any], context: str) -> tuple[dict[str, Any], Any, Any]:
    """The entry of ``context`` ({} when absent), and the entries of its cluster and its user
    (None when the kubeconfig has none of that name)."""
    named = {
        key: {e.get("name"): e for e in config.get(key) or () if isinstance(e, dict)}
        for key in ("contexts", "clusters", "users")
    }
    context_entry = named["contexts"].get(context) or {}
    inner = context_entry.get("context") or {}
    return context_entry, named["clusters"].get(inner.get("cluster")), named["users"].get(inner.get("user"))
