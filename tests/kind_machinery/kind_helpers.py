"""Helpers for the kind layer's tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class KindTestCluster:
    """A kind cluster made straight from a node image (no ktest backend involved)."""

    name: str
    kubeconfig: Path
    kubectl_binary: Path

    def kubectl(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        finished = subprocess.run(
            [str(self.kubectl_binary), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False,
        )
        if check and finished.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {finished.stderr.strip()}")
        return finished.stdout

    def apply(self, manifest: dict[str, Any]) -> None:
        finished = subprocess.run(
            [str(self.kubectl_binary), "--kubeconfig", str(self.kubeconfig), "apply", "-f", "-"],
            input=yaml.safe_dump(manifest), capture_output=True, text=True, timeout=60, check=False,
        )
        assert finished.returncode == 0, finished.stderr
