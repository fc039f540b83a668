"""The plugin costs nothing until a test asks for a ktest fixture, and then every
setting and CRD file is checked before anything starts.

* no kubernetes client (nor ktest's wait/cluster code) is imported by a run that
  uses no ktest fixture;
* a bad ``KTEST_*`` variable is reported in such a run (header and summary), not a
  usage error, and not a Python warning (``filterwarnings = error`` would make it one);
* in a run that uses ktest, bad settings fail the first ktest test with a message
  naming the source (option, ini key, variable) or the file and line, stop the
  session, and start no control plane.

Which modules a run imports can only be seen in a fresh interpreter: those inner runs are child
processes (:func:`run_inner_in_child`). The others run in this process (:func:`run_inner`): a new
pytest config loads the plugins from their entry points there too, and the settings are resolved
from that run's options, ini file and environment.
"""

from __future__ import annotations

import time

import pytest
from inner_runs import run_inner, run_inner_in_child

pytestmark = pytest.mark.own_plane("whether and when the session starts its plane")

# pytest-kind-ng (pytest-kind's fork, in the dev extra) and pytest-kubernetes import HTTP/YAML
# libraries themselves: leave them out
OTHERS_OFF = ("-p", "no:pytest-kind-ng", "-p", "no:pytest-kubernetes")

NO_KTEST = """
import sys

def test_plain():
    heavy = [m for m in ("kubernetes", "urllib3", "yaml", "tenacity", "ktest.wait.sync", "ktest.cluster",
                         "ktest.sessions", "ktest.backends.bare.backend", "ktest.backends.kind.backend",
                         "ktest.assets.resolve", "filelock") if m in sys.modules]
    print("HEAVY", heavy)
"""

USES_KTEST = """
def test_uses_ktest(cluster):
    pass

def test_second(cluster):
    pass

def test_plain():
    pass
"""


@pytest.mark.parametrize("version", [None, "1.37"])
def test_a_run_without_ktest_fixtures_imports_nothing_heavy(
    pytester: pytest.Pytester, inner_env: dict, monkeypatch: pytest.MonkeyPatch, version: str | None
) -> None:
    if version:  # the version selector is parsed without the download and build machinery
        monkeypatch.setenv("KTEST_K8S_VERSION", version)
    result = run_inner_in_child(pytester, NO_KTEST, "-s", *OTHERS_OFF)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*HEAVY []"])


def test_a_bad_variable_is_only_reported_without_ktest_fixtures(
    pytester: pytest.Pytester, inner_env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    monkeypatch.setenv("KTEST_KEEP_NAMESPACES", "sometimes")
    monkeypatch.setenv("KTEST_TIMEOUT", "ten")
    result = run_inner_in_child(pytester, NO_KTEST, "-s", *OTHERS_OFF)  # a child: HEAVY
    result.assert_outcomes(passed=1)
    bad = "environment variable KTEST_TIMEOUT: 'ten' is not a valid timeout"
    result.stdout.fnmatch_lines(
        [
            f"ktest: bad settings (ignored unless a test uses a ktest fixture): {bad}*",
            "*HEAVY []",
            f"bad settings (ignored unless a test uses a ktest fixture): {bad}*",
        ]
    )
    quiet = run_inner(pytester, NO_KTEST, "-q", *OTHERS_OFF)  # no header with -q: the summary says it
    quiet.assert_outcomes(passed=1)
    quiet.stdout.fnmatch_lines([f"bad settings (ignored unless a test uses a ktest fixture): {bad}*"])


def _bad_run(pytester: pytest.Pytester, *args: str, says: str) -> pytest.RunResult:
    """Run USES_KTEST with ``args``: the first ktest test must error with the line ``says``
    (an fnmatch pattern) and stop the session before any control plane starts."""
    started = time.monotonic()
    result = run_inner(pytester, USES_KTEST, *OTHERS_OFF, *args)
    assert time.monotonic() - started < 60, "a control plane was started"
    # the first ktest test errors, the session stops there: nothing else runs
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([says])
    result.stdout.fnmatch_lines(["*Interrupted: ktest: bad settings*"])
    assert "\ncluster: " not in result.stdout.str()  # the summary line of a backend that opened
    return result


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        pytest.param(
            "KTEST_KEEP_NAMESPACES",
            "sometimes",
            "*ktest: environment variable KTEST_KEEP_NAMESPACES: 'sometimes' is not a valid keep_namespaces; "
            "allowed values: never, on-failure, always",
            id="keep-namespaces-unknown",
        ),
        pytest.param(
            "KTEST_RUN_DIR",
            "/nonexistent/ktest-runs",
            "*ktest: environment variable KTEST_RUN_DIR: /nonexistent/ktest-runs is not a directory*",
            id="run-dir-missing",
        ),
    ],
)
def test_a_bad_variable_fails_the_first_ktest_test_and_stops(
    pytester: pytest.Pytester,
    inner_env: dict,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    says: str,
) -> None:
    monkeypatch.setenv(variable, value)
    _bad_run(pytester, says=says)


def test_an_unknown_controller_in_the_ini_is_rejected_before_anything_starts(
    pytester: pytest.Pytester, inner_env: dict
) -> None:
    pytester.makeini("[pytest]\nktest_controllers = garbagecollector,namespaces-controller\n")
    result = _bad_run(
        pytester,
        says=(
            "*ktest: ini key ktest_controllers: unknown kube-controller-manager controller "
            "'namespaces-controller' (did you mean 'namespace-controller'?). Known controllers*"
        ),
    )
    assert "garbage-collector-controller, horizontal-pod-autoscaler-controller, " in result.stdout.str()
    assert "During handling of the above exception" not in result.stdout.str()


def test_invalid_crd_yaml_is_reported_with_file_and_line_before_anything_starts(
    pytester: pytest.Pytester, inner_env: dict
) -> None:
    crds = pytester.mkdir("crds")
    (crds / "good.yaml").write_text("")  # empty files are fine
    (crds / "widgets.yaml").write_text(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n"
        "  name: widgets.example.com\n spec: [\n"
    )
    _bad_run(
        pytester,
        "--ktest-crds=crds",
        says="*ktest: option --ktest-crds: */crds/widgets.yaml: line 5, column 2: not valid YAML*",
    )


def test_a_non_crd_in_the_crd_paths_is_reported_before_anything_starts(
    pytester: pytest.Pytester, inner_env: dict
) -> None:
    crds = pytester.mkdir("crds")
    (crds / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n")
    pytester.makeini("[pytest]\nktest_crds = crds\n")
    _bad_run(
        pytester,
        says=(
            "*ktest: ini key ktest_crds: */crds/cm.yaml*ConfigMap settings (v1) is not a "
            "CustomResourceDefinition*"
        ),
    )


def test_a_bad_kind_config_is_reported_with_its_line_before_any_cluster_is_created(
    pytester: pytest.Pytester, inner_env: dict
) -> None:
    pytester.path.joinpath("kind.yaml").write_text("kind: Cluster\nnodes:\n- role: worker\n  extra: [\n")
    _bad_run(
        pytester,
        "--ktest-backend=kind",
        "--ktest-kind-config=kind.yaml",
        says="*ktest: option --ktest-kind-config: kind config */kind.yaml line 5: not valid YAML*",
    )
