"""An unknown extra kube-apiserver flag or feature gate is a bad setting like any other:
the first test that uses ktest fails with one short error naming the
flag and how to fix it, the session stops there, and no control plane is started."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.own_plane("API server flags shape the plane the session starts")

SESSION = """
def test_plain():
    pass

def test_first(cluster):
    pass

def test_second(cluster):
    pass

def test_third(namespace):
    pass
"""


def _processes_naming(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (a control plane's run directory)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in command:
            found.append(command)
    return found


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("--ktest-apiserver-flag=--event-tll=2h",
         "ktest: option --ktest-apiserver-flag: kube-apiserver {version} has no flag --event-tll "
         "(did you mean --event-ttl?); correct or remove it"),
        ("--ktest-feature-gates=AllAlfa=true",
         "ktest: option --ktest-feature-gates: kube-apiserver {version} knows no feature gate AllAlfa "
         "(did you mean AllAlpha?); correct or remove it"),
    ],
    ids=["flag", "feature-gate"],
)
def test_unknown_flag_stops_the_session_with_one_short_error(
    pytester: pytest.Pytester, inner_env: dict, tmp_path: Path, option: str, says: str
) -> None:
    from ktest.assets import resolve_assets

    version = resolve_assets(None).version
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    pytester.makepyfile(SESSION)
    result = pytester.runpytest_inprocess(option, f"--ktest-run-dir={run_dir}")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret != 0, output
    result.assert_outcomes(passed=1, errors=1)  # test_plain ran; test_first said why; the rest did not run
    message = says.format(version=version)
    assert message in output, output
    mentions = output.count("has no flag") + output.count("knows no feature gate")
    assert mentions <= 2, output  # the failure and its summary line
    assert "Traceback" not in output and "raise " not in output, output
    assert "Interrupted: ktest: bad settings" in output, output
    assert "cluster: " not in output, output  # the ktest summary names a cluster only once one was opened
    assert not list(run_dir.iterdir())
    assert not _processes_naming(str(run_dir))
