"""``create_cluster`` run against a stand-in for the kind binary (a shell script), for tests of what
ktest does before and around ``kind create cluster`` without a Docker engine: the stand-in's
``create`` fails, so the call ends in a KindError whose message carries what the stand-in printed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ktest.backends.kind.cluster import create_cluster
from ktest.errors import KindError

CONFIG = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4"}


def failed_create(tmp_path: Path, script: str, **options: Any) -> KindError:
    """The KindError of ``create_cluster`` with ``script`` as kind (records under tmp_path/records)."""
    kind = tmp_path / "kind"
    kind.write_text(script)
    kind.chmod(0o700)
    with pytest.raises(KindError) as caught:
        create_cluster(kind, image="ktest/node:none", version="1.37.2", config=CONFIG,
                       records_dir=tmp_path / "records", **options)
    return caught.value
