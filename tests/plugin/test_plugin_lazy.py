"""The plugin costs nothing until a test asks for a ktest fixture, and then every
setting and CRD file is checked before anything starts.

* no kubernetes client (nor ktest's wait/cluster code) is imported by a run that
  uses no ktest fixture;
* a bad ``KTEST_*`` variable is reported in such a run (header and summary), not a
  usage error, and not a Python warning (``filterwarnings = error`` would make it one);
* in a run that uses ktest, bad settings fail the first ktest test with a message
  naming the source (option, ini key, variable) or the file and line, stop the
  session, and start no control plane.

Which modules a run imports can only be seen in a fresh interpreter: those inner runs share one
child process (``FRESH_RUNS``). The others run in this process (:func:`run_inner`): a new
pytest config loads the plugins from their entry points there too, and the settings are resolved
from that run's options, ini file and environment.
"""

from __future__ import annotations

import json
import re
import sys
import time

import pytest
from inner_runs import run_inner

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


# One fresh interpreter serves the three runs below, one after the other (``pytest.main`` in a child):
# what a run imports is what sys.modules holds after it minus what the runs before it left, and
# these runs must leave nothing heavy, so each checks the whole of sys.modules.
FRESH_RUNS = """
import json, os, sys
import pytest

runs, outputs = json.loads(sys.argv[1]), []
for env, args, output in runs:
    saved = dict(os.environ)
    os.environ.update(env)
    sys.stdout.flush()
    kept = os.dup(1)
    with open(output, "w") as file:
        os.dup2(file.fileno(), 1)
        try:
            code = pytest.main(args)
        finally:
            sys.stdout.flush()
            os.dup2(kept, 1)
    os.environ.clear()
    os.environ.update(saved)
    print("RUN", output, int(code))
"""

BAD_TIMEOUT = "environment variable KTEST_TIMEOUT: 'ten' is not a valid timeout"


def test_runs_without_ktest_fixtures_import_nothing_heavy_and_only_report_bad_variables(
    pytester: pytest.Pytester, inner_env: dict
) -> None:
    """Without the version setting, with it (the selector is parsed without the download and build
    machinery), and with bad variables under ``filterwarnings = error``: a run that uses no ktest
    fixture imports nothing heavy, and reports a bad variable (header and summary) without failing."""
    pytester.makepyfile(NO_KTEST)
    outputs = {name: pytester.path / f"{name}.out" for name in ("default", "version", "bad")}
    bad = {"KTEST_KEEP_NAMESPACES": "sometimes", "KTEST_TIMEOUT": "ten"}
    runs = [
        ({}, ["-s", *OTHERS_OFF], str(outputs["default"])),
        ({"KTEST_K8S_VERSION": "1.37"}, ["-s", *OTHERS_OFF], str(outputs["version"])),
        (bad, ["-s", "-o", "filterwarnings=error", *OTHERS_OFF], str(outputs["bad"])),
    ]
    child = pytester.run(sys.executable, "-c", FRESH_RUNS, json.dumps(runs), timeout=300)
    assert child.ret == 0, child.stdout.str() + child.stderr.str()
    said = {name: path.read_text() for name, path in outputs.items()}
    for name, text in said.items():
        heavy = f"the {name} run imported heavy modules:\n{text}"
        assert re.search(r"\bHEAVY \[\]$", text, re.MULTILINE), heavy
        assert re.search(r"\b1 passed\b", text), f"the {name} run did not pass its test:\n{text}"
    assert [line.split()[2] for line in child.outlines if line.startswith("RUN ")] == ["0", "0", "0"]
    header = f"ktest: bad settings (ignored unless a test uses a ktest fixture): {BAD_TIMEOUT}"
    summary = f"bad settings (ignored unless a test uses a ktest fixture): {BAD_TIMEOUT}"
    lines = said["bad"].splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert first is not None, f"no header line about the bad variable:\n{said['bad']}"
    assert any(line.startswith(summary) for line in lines[first + 1:]), f"no summary line:\n{said['bad']}"
    assert BAD_TIMEOUT not in said["default"] + said["version"]


def test_a_bad_variable_is_reported_in_the_summary_under_q(
    pytester: pytest.Pytester, inner_env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTEST_KEEP_NAMESPACES", "sometimes")
    monkeypatch.setenv("KTEST_TIMEOUT", "ten")
    quiet = run_inner(pytester, NO_KTEST, "-q", *OTHERS_OFF)  # no header with -q: the summary says it
    quiet.assert_outcomes(passed=1)
    quiet.stdout.fnmatch_lines([f"bad settings (ignored unless a test uses a ktest fixture): {BAD_TIMEOUT}*"])


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
