"""The node image setting (``--ktest-kind-image``, ini ``ktest_kind_image``, ``KTEST_KIND_IMAGE``)
and pytest-kind's options on ``--ktest-backend kind``: each honoured as the ktest setting it
means or refused naming the ktest option to use, never ignored; off kind they stay the fork's.

No cluster is made here: the settings are resolved as the plugin resolves them, and the inner
pytest runs (in this process, where a new pytest config loads pytest-kind-ng, installed by the dev
extra, from its entry point as in a user's run) only read them. A cluster made from the configured
image: tests/on_kind/test_kind_image.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktest.config import ConfigError, Settings, resolve_settings

pytestmark = pytest.mark.own_plane("the settings line of the session header, reuse off")

DIGEST = "sha256:" + "0123456789abcdef" * 4

SHOW_SETTINGS = """
def test_show(ktest_settings):
    print("KIND_IMAGE", ktest_settings.kind_image, "|", ktest_settings.source_of("kind_image"))
    print("KEEP", ktest_settings.keep_cluster, "|", ktest_settings.source_of("keep_cluster"))
"""


def _resolve(option: str | None = None, *, env: str | None = None, ini: str | None = None) -> Settings:
    return resolve_settings(
        options={"kind_image": option},
        ini={"kind_image": ini},
        env={"KTEST_KIND_IMAGE": env} if env is not None else {},
    )


@pytest.mark.parametrize(
    "reference",
    [
        "kindest/node:v1.35.4",
        f"kindest/node:v1.35.4@{DIGEST}",
        f"kindest/node@{DIGEST}",
        "ktest/kind-node:v1.37.2",
        "registry.example.com:5000/team/kind-node:v1.35.4_custom",
        "localhost:5000/node:v1",
        "mirror:5000/kindest/node:v1.35.4",
    ],
)
def test_a_node_image_is_taken_from_each_source(reference: str) -> None:
    assert _resolve(reference).kind_image == reference
    assert _resolve(reference).source_of("kind_image") == "option --ktest-kind-image"
    assert _resolve(env=f" {reference} ").kind_image == reference
    assert _resolve(ini=reference).source_of("kind_image") == "ini key ktest_kind_image"
    assert _resolve().kind_image is None


@pytest.mark.parametrize(
    ("reference", "why"),
    [
        ("Kindest/Node:v1.35.4", "image names are lower-case"),
        ("kindest/node", "it names no tag or digest (Docker would take :latest"),
        ("kindest/node:v1.35.4@sha256:abc", "the digest 'sha256:abc' must be sha256: followed by 64"),
        (f"kindest/node:v1.35.4@{DIGEST.upper()}", f"the digest '{DIGEST.upper()}' must be sha256: followed"),
        ("kindest/node:v1.35.4@md5:0123", "the digest 'md5:0123' must be sha256"),
        ("kindest/node:v1.35.4 --retain", "it is not an image reference"),
        ("kindest/node:", "it is not an image reference"),
    ],
)
def test_a_bad_node_image_is_refused_saying_why_and_how(reference: str, why: str) -> None:
    labels = {"option": "option --ktest-kind-image", "env": "environment variable KTEST_KIND_IMAGE",
              "ini": "ini key ktest_kind_image"}
    for source, label in labels.items():
        with pytest.raises(ConfigError) as refused:
            _resolve(reference) if source == "option" else _resolve(**{source: reference})
        message = str(refused.value)
        assert message.startswith(f"{label}: {reference!r} is not a valid kind_image: "), message
        assert why in message, message
        assert "write name:tag (kindest/node:v1.35.4, ktest/kind-node:v1.35.4) or pin" in message


def _with_pytest_kind(backend: str, **given: object) -> Settings:
    return resolve_settings(options={"backend": backend}, env={}, foreign=given)


def test_pytest_kind_options_are_taken_as_ktest_settings_on_kind() -> None:
    image = f"kindest/node:v1.35.4@{DIGEST}"
    settings = _with_pytest_kind("kind", keep_cluster=True, kind_image=image)
    assert settings.keep_cluster is True and settings.kind_image == image
    assert settings.source_of("keep_cluster") == "option --keep-cluster (pytest-kind's)"
    assert settings.source_of("kind_image") == "option --kind-image (pytest-kind's)"
    assert "kind_image=" + image + " (option --kind-image (pytest-kind's))" in settings.describe_sources()


def test_a_bad_pytest_kind_image_is_refused_as_a_setting_would_be() -> None:
    with pytest.raises(ConfigError, match=r"^option --kind-image \(pytest-kind's\): 'kindest/node' is not a "
                                          r"valid kind_image: it names no tag or digest"):
        _with_pytest_kind("kind", kind_image="kindest/node")


@pytest.mark.parametrize(
    ("dest", "value", "says"),
    [
        ("cluster_name", "mine",
         "ktest names its kind clusters itself (ktest-run-<random>, so it never touches a cluster of yours "
         "and parallel runs never collide); remove it. To keep the cluster after the run use "
         "--ktest-keep-cluster; to use one cluster for many runs, `ktest up --backend kind` and "
         "--ktest-reuse"),
        ("kubeconfig", "/tmp/kubeconfig",
         "ktest writes the cluster's kubeconfig into the cluster's private directory "
         "(kind_cluster.kubeconfig_path names it); to test a cluster of yours instead use --ktest-backend "
         "existing with --ktest-kubeconfig and --ktest-context"),
        ("kind_bin", "/opt/kind",
         "ktest runs the kind release its node images are made for (`ktest kind install`); to run another "
         "kind binary set KTEST_KIND=<path>"),
        ("kind_kubectl_bin", "/opt/kubectl",
         "ktest runs a kubectl matching the cluster's version (its binary cache); to run another set "
         "KTEST_KUBECTL=<path>"),
    ],
)
def test_pytest_kind_options_without_a_meaning_on_kind_are_refused(dest: str, value: str, says: str) -> None:
    option = "--" + dest.replace("_", "-")
    with pytest.raises(ConfigError) as refused:
        _with_pytest_kind("kind", **{dest: value})
    assert str(refused.value) == (
        f"option {option} (pytest-kind's): ktest's kind_cluster takes the place of pytest-kind's on backend "
        f"kind, and {option} has no meaning there: {says}"
    )


def test_pytest_kind_and_ktest_options_that_disagree_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"option --keep-cluster \(pytest-kind's\) and option "
                                          r"--ktest-keep-cluster disagree \(true against false\); give one"):
        resolve_settings(options={"backend": "kind", "keep_cluster": False}, env={},
                         foreign={"keep_cluster": True})
    agreeing = resolve_settings(options={"backend": "kind", "kind_image": "a/b:v1"}, env={},
                                foreign={"kind_image": "a/b:v1"})
    assert agreeing.source_of("kind_image") == "option --ktest-kind-image"
    # an option beats the environment, whichever plugin's spelling it has
    over_env = resolve_settings(options={"backend": "kind"}, env={"KTEST_KEEP_CLUSTER": "false"},
                                foreign={"keep_cluster": True})
    assert over_env.keep_cluster is True


def test_off_kind_pytest_kind_options_are_the_forks_alone() -> None:
    settings = _with_pytest_kind("bare", keep_cluster=True, kind_image="Not A Reference", cluster_name="mine")
    untouched = _with_pytest_kind("bare")
    assert settings == untouched and settings.describe_sources() == untouched.describe_sources()


# ------------------------------------------------------------ through pytest, pytest-kind-ng installed


def test_pytest_kind_flags_reach_ktests_settings_on_kind(pytester: pytest.Pytester, inner_env: dict[str, str]
                                                         ) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    image = f"kindest/node:v1.35.4@{DIGEST}"
    result = pytester.runpytest_inprocess("-s", "--ktest-backend=kind", "--keep-cluster",
                                          f"--kind-image={image}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        f"*kind_image={image} (option --kind-image (pytest-kind's)), "
        "keep_cluster=true (option --keep-cluster (pytest-kind's))*",
        f"*KIND_IMAGE {image} | option --kind-image (pytest-kind's)",
        "*KEEP True | option --keep-cluster (pytest-kind's)",
    ])


@pytest.mark.parametrize("name", ["mine", "pytest-kind"])  # pytest-kind's default, but spelled out
def test_cluster_name_stops_a_kind_session_with_one_error(
    pytester: pytest.Pytester, inner_env: dict[str, str], name: str
) -> None:
    pytester.makepyfile(SHOW_SETTINGS + "\ndef test_later(ktest_settings):\n    pass\n")
    result = pytester.runpytest_inprocess("--ktest-backend=kind", "--cluster-name", name)
    result.assert_outcomes(errors=1)  # the first ktest test; the session stops there
    result.stdout.fnmatch_lines([
        "*ktest: option --cluster-name (pytest-kind's): ktest's kind_cluster takes the place of "
        "pytest-kind's on backend kind, and --cluster-name has no meaning there: ktest names its kind "
        "clusters itself*",
        "*Interrupted: ktest: bad settings*",
    ])


def test_pytest_kind_flags_leave_ktest_alone_off_kind(pytester: pytest.Pytester, inner_env: dict[str, str]
                                                      ) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest_inprocess("-s", "--cluster-name=mine", "--keep-cluster", "--kind-image=x:y")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["ktest settings from: all defaults", "*KIND_IMAGE None | default",
                                 "*KEEP False | default"])


def test_the_kind_image_setting_is_read_from_the_ini_file(
    pytester: pytest.Pytester, inner_env: dict[str, str], tmp_path: Path
) -> None:
    pytester.makeini(f"[pytest]\nktest_kind_image = kindest/node:v1.35.4@{DIGEST}\n")
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest_inprocess("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*KIND_IMAGE kindest/node:v1.35.4@{DIGEST} | ini key ktest_kind_image"])


def test_ktest_up_checks_its_kind_image_as_the_setting_before_anything_starts(tmp_path: Path) -> None:
    import subprocess
    import sys

    up = subprocess.run(
        [sys.executable, "-m", "ktest.cli.main", "up", "--backend", "kind", "--kind-image",
         "Kindest/node:v1"],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=120, cwd=tmp_path,
    )
    assert up.returncode == 2, up.stderr
    assert up.stderr.strip() == (
        "ktest: error: --kind-image (default $KTEST_KIND_IMAGE): 'Kindest/node:v1' is not a valid "
        "kind_image: image names are lower-case (only the registry's host name and the tag may use "
        "capitals); write name:tag (kindest/node:v1.35.4, ktest/kind-node:v1.35.4) or pin the image by its "
        "digest: "
        "name:tag@sha256:<64 hex digits>"
    )
