"""Self-contained kubeconfig files (certificates embedded, no file references)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    client_cert_pem: bytes,
    client_key_pem: bytes,
    cluster_name: str = "ktest",
) -> Path:
    """Write a kubeconfig for one client-certificate identity; return its path.

    Written to a temporary name and renamed, so a reader never sees half a file
    (the API server port can change on restart and the file is rewritten).
    """
    context = f"{user}@{cluster_name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client_cert_pem),
                    "client-key-data": _b64(client_key_pem),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        yaml.safe_dump(config, file, sort_keys=False)
    os.replace(partial, path)
    return path
