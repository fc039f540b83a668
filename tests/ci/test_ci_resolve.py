"""scripts/ci/resolve.py: the resolved Kubernetes version and the cache keys derived from it."""

from __future__ import annotations

from pathlib import Path

import ktest_requirement
import pytest
import resolve
from ci_helpers import read_outputs, run_ci_script
from gha import CIError

REPORT = {
    "ktest_version": "0.1.0",
    "default": "1.37",
    "supported": ["1.37", "1.36", "1.35"],
    "kind_version": "v0.33.0",
    "resolved": {"1.37": "1.37.2", "1.36": None},
}


def test_binaries_key_holds_the_patch_the_ktest_version_and_the_os() -> None:
    keys = resolve.cache_keys("1.37.2", "0.1.0", "v0.33.0", "Linux", "X64")
    assert keys.binaries == "ktest-binaries-v1-Linux-X64-k8s1.37.2-ktest0.1.0"
    assert keys.binaries_restore == ("ktest-binaries-v1-Linux-X64-k8s1.37.2-", "ktest-binaries-v1-Linux-X64-")
    assert keys.node_image == "ktest-kind-node-v1-Linux-X64-kindv0.33.0-k8s1.37.2"


def test_another_patch_ktest_version_or_os_gets_another_key() -> None:
    base = resolve.cache_keys("1.37.2", "0.1.0", "v0.33.0", "Linux", "X64")
    for other in (
        resolve.cache_keys("1.37.3", "0.1.0", "v0.33.0", "Linux", "X64"),
        resolve.cache_keys("1.37.2", "0.2.0", "v0.33.0", "Linux", "X64"),
        resolve.cache_keys("1.37.2", "0.1.0", "v0.33.0", "macOS", "ARM64"),
    ):
        assert other.binaries != base.binaries
    # The node image depends on kind and Kubernetes, not on ktest's version.
    assert resolve.cache_keys("1.37.2", "0.2.0", "v0.33.0", "Linux", "X64").node_image == base.node_image
    assert resolve.cache_keys("1.37.2", "0.1.0", "v0.34.0", "Linux", "X64").node_image != base.node_image


def test_every_restore_key_is_a_prefix_of_the_key_most_specific_first() -> None:
    keys = resolve.cache_keys("1.36.3", "0.1.0", "v0.33.0", "Linux", "X64")
    assert all(keys.binaries.startswith(prefix) for prefix in keys.binaries_restore)
    assert [len(p) for p in keys.binaries_restore] == sorted(
        (len(p) for p in keys.binaries_restore), reverse=True
    )


def test_resolve_returns_the_patch_and_names_supported_versions_when_unknown() -> None:
    assert resolve.resolve("1.37", "bare", REPORT) == "1.37.2"
    with pytest.raises(
        CIError, match=r"no Kubernetes release matching '1.36'.*supported minors: 1.37, 1.36, 1.35"
    ):
        resolve.resolve("1.36", "bare", REPORT)
    with pytest.raises(CIError, match="backend 'docker' is not one of: bare, kind"):
        resolve.resolve("1.37", "docker", REPORT)


def test_the_script_writes_outputs_from_ktest_versions(tmp_path: Path) -> None:
    """Real `ktest versions`: an exact release needs no listing, so this runs offline."""
    output = tmp_path / "out"
    done = run_ci_script(
        "resolve.py", "--k8s-version", "1.37.2", "--backend", "kind", "--os", "Linux", "--arch", "X64",
        cwd=tmp_path,
        env={"GITHUB_OUTPUT": str(output)},
    )
    assert done.returncode == 0, done.stderr
    outputs = read_outputs(output)
    assert outputs["k8s-version"] == "1.37.2"
    assert outputs["node-image"] == "kindest/node:v1.37.2"
    assert outputs["binaries-key"].startswith("ktest-binaries-v1-Linux-X64-k8s1.37.2-ktest")
    assert outputs["binaries-restore-keys"].splitlines() == [
        "ktest-binaries-v1-Linux-X64-k8s1.37.2-",
        "ktest-binaries-v1-Linux-X64-",
    ]


def test_an_unsupported_version_fails_at_once_listing_the_supported_ones(tmp_path: Path) -> None:
    done = run_ci_script(
        "resolve.py", "--k8s-version", "1.20", "--os", "Linux", "--arch", "X64",
        cwd=tmp_path,
        env={"GITHUB_OUTPUT": str(tmp_path / "out")},
    )
    assert done.returncode == 2
    assert "k8s-version '1.20'" in done.stderr
    assert "supported minors are 1.37, 1.36, 1.35" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("spec", "backend", "expected"),
    [
        ("", "bare", "/src"),
        ("", "kind", "/src[kind]"),
        ("ktest==0.2.0", "bare", "ktest==0.2.0"),
        ("ktest==0.2.0", "kind", "ktest[kind]==0.2.0"),
        ("ktest[kind,kopf]>=0.2", "kind", "ktest[kind,kopf]>=0.2"),
        (
            "ktest @ git+https://github.com/acme/ktest@abc",
            "kind",
            "ktest[kind] @ git+https://github.com/acme/ktest@abc",
        ),
        ("git+https://github.com/acme/ktest@abc", "bare", "git+https://github.com/acme/ktest@abc"),
        ("./vendor/ktest", "kind", "./vendor/ktest[kind]"),
    ],
)
def test_the_ktest_requirement_gets_the_backend_extra(spec: str, backend: str, expected: str) -> None:
    assert ktest_requirement.requirement(spec, "/src", backend) == expected


def test_a_bare_url_cannot_carry_the_kind_extra() -> None:
    with pytest.raises(CIError, match=r"write it as 'ktest\[kind\] @ git\+https://x/ktest'"):
        ktest_requirement.requirement("git+https://x/ktest", "/src", "kind")
    with pytest.raises(CIError, match="backend 'docker' is not one of: bare, kind"):
        ktest_requirement.requirement("", "/src", "docker")
