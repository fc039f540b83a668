"""Settings: CLI option > environment variable > ini key > default, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktest.config import Settings, resolve_settings
from ktest.errors import ConfigError

pytestmark = pytest.mark.own_plane("the settings line of the session header, reuse off")


def test_defaults() -> None:
    settings = resolve_settings(env={})
    assert settings == Settings()
    assert settings.backend == "bare"
    assert settings.controllers == ("garbagecollector", "namespace")
    assert (settings.timeout, settings.interval, settings.consistently) == (10.0, 0.25, 2.0)
    assert settings.keep_namespaces == "never"
    assert settings.reuse is False


def test_option_beats_env_beats_ini(tmp_path: Path) -> None:
    """pytest-django's order: a CI matrix's KTEST_* variable wins over the project's ini file."""
    env = {"KTEST_TIMEOUT": "3", "KTEST_INTERVAL": "0.5", "KTEST_CONSISTENTLY": "4", "KTEST_REUSE": "yes"}
    ini = {"timeout": "2", "interval": "0.1", "finalizer_grace": "7", "reuse": False}
    options = {"timeout": "1"}
    settings = resolve_settings(options=options, ini=ini, env=env, cwd=tmp_path)
    assert settings.timeout == 1.0
    assert settings.interval == 0.5
    assert settings.consistently == 4.0
    assert settings.finalizer_grace == 7.0
    assert settings.reuse is True
    assert settings.source_of("timeout") == "option --ktest-timeout"
    assert settings.source_of("interval") == "environment variable KTEST_INTERVAL"
    assert settings.source_of("finalizer_grace") == "ini key ktest_finalizer_grace"
    assert settings.source_of("keep_namespaces") == "default"


def test_matrix_variables_beat_the_project_ini(tmp_path: Path) -> None:
    ini = {"backend": "bare", "k8s_version": "1.37"}
    env = {"KTEST_BACKEND": "kind", "KTEST_K8S_VERSION": "1.35"}
    settings = resolve_settings(ini=ini, env=env, cwd=tmp_path, ini_dir=tmp_path)
    assert (settings.backend, settings.k8s_version) == ("kind", "1.35")
    assert settings.describe_sources() == (
        "k8s_version=1.35 (environment variable KTEST_K8S_VERSION), backend=kind (environment variable "
        "KTEST_BACKEND)"
    )


@pytest.mark.parametrize("name", ["kubeconfig", "kind_config", "artifacts_dir", "run_dir", "crds"])
def test_unknown_user_in_a_path_is_a_config_error(tmp_path: Path, name: str) -> None:
    from ktest.config import SPECS_BY_NAME

    spec = SPECS_BY_NAME[name]
    with pytest.raises(ConfigError) as raised:
        resolve_settings(env={spec.env: "~nosuchuser-ktest/dir"}, cwd=tmp_path)
    message = str(raised.value)
    assert message.startswith(f"environment variable {spec.env}: '~nosuchuser-ktest/dir'")
    assert "no user 'nosuchuser-ktest'" in message and "absolute path" in message


def test_flag_option_turns_reuse_off_over_env(tmp_path: Path) -> None:
    settings = resolve_settings(options={"reuse": False}, env={"KTEST_REUSE": "1"}, cwd=tmp_path)
    assert settings.reuse is False


def test_crd_paths_relative_to_ini_dir_and_cwd(tmp_path: Path) -> None:
    (tmp_path / "ini" / "config" / "crd").mkdir(parents=True)
    (tmp_path / "cwd" / "more").mkdir(parents=True)
    from_ini = resolve_settings(ini={"crds": ["config/crd"]}, env={}, ini_dir=tmp_path / "ini")
    assert from_ini.crds == (tmp_path / "ini" / "config" / "crd",)
    from_env = resolve_settings(env={"KTEST_CRDS": "more"}, cwd=tmp_path / "cwd")
    assert from_env.crds == (tmp_path / "cwd" / "more",)


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        ({"env": {"KTEST_BACKEND": "kube"}}, "environment variable KTEST_BACKEND: 'kube' is not a valid "
         "backend; allowed values: bare, existing"),
        ({"ini": {"controllers": "garbagecolector,replicaset"}}, "ini key ktest_controllers: "
         "unknown kube-controller-manager controller 'garbagecolector' (did you mean 'garbagecollector'?)"),
        ({"ini": {"keep_namespaces": "sometimes"}}, "ini key ktest_keep_namespaces: 'sometimes' is not a "
         "valid keep_namespaces; allowed values: never, on-failure, always"),
        ({"options": {"timeout": "ten"}}, "option --ktest-timeout: 'ten' is not a valid timeout"),
        ({"options": {"interval": "0"}}, "more than 0"),
        ({"env": {"KTEST_REUSE": "maybe"}}, "'maybe' is not a valid reuse"),
        ({"env": {"KTEST_K8S_VERSION": "2.1"}}, "environment variable KTEST_K8S_VERSION: Kubernetes version "
         "selector '2.1' asks for major version 2"),
        ({"ini": {"controllers": "none,namespace"}}, "mixes 'none' with controller names"),
        ({"ini": {"crds": ["no/such/dir"]}}, "ini key ktest_crds: CRD path 'no/such/dir' does not exist"),
        ({"env": {"KTEST_BACKEND": "existing"}}, "backend existing needs the kubeconfig context named"),
    ],
)
def test_bad_values_name_their_source(tmp_path: Path, sources: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_settings(
            options=sources.get("options"), ini=sources.get("ini"), env=sources.get("env", {}),
            cwd=tmp_path, ini_dir=tmp_path,
        )
    assert expected in str(raised.value)


def test_existing_needs_a_kubeconfig_that_exists(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kubeconfig .*missing.* does not exist"):
        resolve_settings(
            env={"KTEST_BACKEND": "existing", "KTEST_CONTEXT": "dev", "KTEST_KUBECONFIG": "missing"},
            cwd=tmp_path,
        )


def test_controllers_none_and_version_latest(tmp_path: Path) -> None:
    env = {"KTEST_CONTROLLERS": "none", "KTEST_K8S_VERSION": "latest"}
    settings = resolve_settings(env=env, cwd=tmp_path)
    assert settings.controllers == ()
    assert settings.k8s_version is None
    assert resolve_settings(env={"KTEST_K8S_VERSION": "v1.36"}, cwd=tmp_path).k8s_version == "1.36"


PRINT_SETTINGS = """
def test_show(ktest_settings):
    s = ktest_settings
    print("SETTINGS", s.timeout, s.interval, s.consistently, s.keep_namespaces, s.controllers)
"""


def test_precedence_through_pytest(pytester: pytest.Pytester, inner_env: dict, monkeypatch) -> None:
    pytester.makepyfile(PRINT_SETTINGS)
    pytester.makeini(
        """
        [pytest]
        ktest_timeout = 2
        ktest_interval = 0.1
        ktest_keep_namespaces = on-failure
        """
    )
    monkeypatch.setenv("KTEST_TIMEOUT", "3")
    monkeypatch.setenv("KTEST_INTERVAL", "0.5")
    monkeypatch.setenv("KTEST_CONSISTENTLY", "4")
    monkeypatch.setenv("KTEST_CONTROLLERS", "namespace")
    result = pytester.runpytest_inprocess("-s", "--ktest-timeout=1", "--ktest-keep-namespaces=always")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*SETTINGS 1.0 0.5 4.0 always ('namespace',)"])
    header = "ktest: backend=bare k8s=latest controllers=namespace keep-namespaces=always"
    sources = (
        "ktest settings from: controllers=namespace (environment variable KTEST_CONTROLLERS), "
        "timeout=1.0 (option --ktest-timeout), interval=0.5 (environment variable KTEST_INTERVAL), "
        "consistently=4.0 (environment variable KTEST_CONSISTENTLY), "
        "keep_namespaces=always (option --ktest-keep-namespaces)"
    )
    result.stdout.fnmatch_lines([header, sources])


def test_bad_setting_fails_the_test_that_uses_ktest(pytester: pytest.Pytester, inner_env: dict,
                                                    monkeypatch) -> None:
    """(Runs that use no ktest fixture only get a warning: see test_plugin_lazy.py.)"""
    pytester.makepyfile(PRINT_SETTINGS)
    monkeypatch.setenv("KTEST_KEEP_NAMESPACES", "sometimes")
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["ktest: environment variable KTEST_KEEP_NAMESPACES: 'sometimes' is not a valid keep_namespaces; "
         "allowed values: never, on-failure, always"]
    )


def test_wait_defaults_follow_the_settings(pytester: pytest.Pytester, inner_env: dict) -> None:
    pytester.makepyfile(
        """
        from ktest.wait.defaults import current_defaults

        def test_defaults():
            d = current_defaults()
            assert (d.timeout, d.interval, d.duration) == (7.0, 0.5, 1.5)
        """
    )
    result = pytester.runpytest_inprocess(
        "--ktest-timeout=7", "--ktest-interval=0.5", "--ktest-consistently=1.5"
    )
    result.assert_outcomes(passed=1)
