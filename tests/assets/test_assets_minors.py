"""ktest/assets/minors.py: the one table of what differs per Kubernetes minor, checked against
each minor's own sources on the Go module proxy and against every reader of it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from assets_helpers import REPO_ROOT  # type: ignore[import-not-found]

from ktest.assets import minors
from ktest.assets.gotool import find_go
from ktest.backends.kind import recipe
from ktest.errors import AssetsError
from ktest_offline.kubernetes import ETCD_SERVER_RELEASES


def test_the_supported_minors_run_from_1_32_to_the_default_without_a_gap() -> None:
    numbers = [minors.MINORS[minor].minor_number for minor in minors.supported_minors()]
    assert numbers == list(range(37, 31, -1))
    assert minors.supported_minors()[0] == minors.DEFAULT_MINOR
    assert minors.supported_minors()[1] == minors.OLDER_MINOR  # the previous minor: upgrades need no build
    for minor, facts in minors.MINORS.items():
        assert facts.minor == minor and facts.checked_patch.startswith(minor + ".")


def _module_source(version: str) -> Path:
    """k8s.io/kubernetes ``version``'s source, from the Go module proxy (or the module cache)."""
    go = find_go()
    assert go is not None, "these facts are checked against the Go module source: put `go` on PATH"
    finished = subprocess.run(
        [go.path, "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
        capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    return Path(json.loads(finished.stdout)["Dir"])


def _go_string(source: str, name: str) -> str:
    match = re.search(rf'^\s*{name}\s*=\s*"([^"]+)"', source, re.MULTILINE)
    assert match, f"{name} not found"
    return match.group(1)


@pytest.mark.parametrize("minor", sorted(minors.MINORS))
def test_the_facts_are_what_the_minors_kubeadm_and_go_mod_say(minor: str) -> None:
    facts = minors.MINORS[minor]
    source = _module_source(facts.checked_patch)
    constants = (source / "cmd/kubeadm/app/constants/constants.go").read_text()
    assert _go_string(constants, "DefaultEtcdVersion") == f"{facts.etcd}-0"
    assert _go_string(constants, "CoreDNSVersion") == facts.coredns
    assert _go_string(constants, "PauseVersion") == facts.pause
    go_directive = re.search(r"^go (\S+)$", (source / "go.mod").read_text(), re.MULTILINE)
    assert go_directive and go_directive.group(1) == facts.go


def test_the_kind_recipe_and_the_go_build_read_the_table() -> None:
    assert set(recipe.MINORS) == set(minors.MINORS)
    for minor, facts in minors.MINORS.items():
        kind_recipe = recipe.MINORS[minor]
        assert (kind_recipe.coredns, kind_recipe.pause, kind_recipe.etcd_version) == (
            facts.coredns, facts.pause, facts.etcd
        )
        assert ETCD_SERVER_RELEASES[minor] == facts.etcd
    assert recipe.DEFAULT_MINOR == minors.DEFAULT_MINOR


def test_an_unsupported_minor_is_refused_naming_the_supported_ones() -> None:
    with pytest.raises(AssetsError) as caught:
        minors.facts("1.31")
    assert str(caught.value) == (
        "Kubernetes 1.31 is not supported by ktest: supported minors are 1.37, 1.36, 1.35, 1.34, 1.33, "
        "1.32.\nPick one of those (e.g. --k8s-version 1.37)."
    )


def test_make_test_tests_the_older_minor_of_the_table() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    older = re.search(r"^OLDER_K8S_VERSION \?= (\S+)$", makefile, re.MULTILINE)
    assert older and older.group(1) == minors.OLDER_MINOR
