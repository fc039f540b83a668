"""Issue user credentials for an embedded control plane from another process.

Only the holding process has the ControlPlane object (:meth:`ControlPlane.add_user`); an attached
process signs client certificates with the CA files in the control plane's directory and writes
a kubeconfig for the same server as the admin kubeconfig.
"""

from __future__ import annotations

import datetime
import os
import re
import secrets
from collections.abc import Sequence
from pathlib import Path

import yaml

from ktest.base.certs import CertificateAuthority
from ktest.base.kubeconfig import write_kubeconfig
from ktest.errors import ClusterError

_VALIDITY = datetime.timedelta(days=30)


def issue_user(directory: Path, name: str, groups: Sequence[str] = ()) -> Path:
    """Write a kubeconfig for user ``name`` in ``groups`` (client certificate CN=name, O=groups)."""
    if not name:
        raise ClusterError("a user needs a non-empty name")
    try:
        try:
            authority = CertificateAuthority.load(directory / "certs")
        except TypeError as error:  # ktest's own CA is ECDSA; kubeadm's (kind) is RSA
            raise ClusterError(str(error)) from None
        admin = yaml.safe_load((directory / "admin.kubeconfig").read_text())
        server = admin["clusters"][0]["cluster"]["server"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
        raise ClusterError(
            f"cannot issue credentials for user {name!r}: the control plane's files in {directory} "
            f"are unreadable or gone ({error}); is the control plane still running?"
        ) from None
    cert_pem, key_pem = authority.client_pem(name, groups, validity=_VALIDITY)
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    # Several processes issue users into the same directory: the suffix keeps files apart.
    path = directory / "users" / f"{stem}-{os.getpid()}-{secrets.token_hex(3)}.kubeconfig"
    return write_kubeconfig(
        path,
        server=server,
        ca_pem=authority.cert_pem,
        user=name,
        client_cert_pem=cert_pem,
        client_key_pem=key_pem,
    )
