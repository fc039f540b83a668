"""kubeconfig files whose credentials are files next to them, not embedded data.

The kubernetes Python client copies ``*-data`` fields to files in ``$TMPDIR``
and removes them only at a clean interpreter exit, so a test run ended by
SIGTERM or ``kill -9`` would leave the admin key there. A kubeconfig that
names files (inside the control plane's 0700 directory) is used as is: no
copy is made, and the files go when the directory goes.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ktest.base.procfs import write_private_file

CREDENTIALS_SUFFIX = ".credentials"


def credentials_directory(kubeconfig: Path) -> Path:
    """Where the CA, certificate and key of ``kubeconfig`` are written."""
    return kubeconfig.with_name(kubeconfig.name + CREDENTIALS_SUFFIX)


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

    The PEM data goes to ``<path>.credentials/`` (0700, files 0600) and the
    kubeconfig refers to it by absolute path. Everything is written to a
    temporary name and renamed, so a reader never sees half a file (the API
    server port can change on restart and the file is rewritten).
    """
    path = path.absolute()
    credentials = credentials_directory(path)
    ca_file, cert_file, key_file = (credentials / n for n in ("ca.crt", "client.crt", "client.key"))
    write_private_file(ca_file, ca_pem)
    write_private_file(cert_file, client_cert_pem)
    write_private_file(key_file, client_key_pem)
    context = f"{user}@{cluster_name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster_name, "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(cert_file), "client-key": str(key_file)},
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    write_private_file(path, yaml.safe_dump(config, sort_keys=False))
    return path
