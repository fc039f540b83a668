"""The pytest form of upgrades, in inner sessions through the plugin: the session's shared plane
is never upgraded, kind says it cannot upgrade in place, a wrong ktest_upgrade marker says how to
write it, and control_plane_upgrade gives the test its own plane at the previous minor."""

from __future__ import annotations

import pytest
from inner_runs import run_inner

# The inner sessions run in this process (pytester restores its modules); their planes are children of it.

SESSION_PLANE = '''
import pytest
from ktest.errors import ControlPlaneError

def test_the_session_plane_is_not_upgraded(control_plane):
    with pytest.raises(ControlPlaneError) as refused:
        control_plane.upgrade("1.99")
    print("REFUSED:", str(refused.value).splitlines()[0])
'''

OWN_PLANE = '''
def test_a_plane_of_its_own(control_plane_upgrade, cluster):
    own = control_plane_upgrade.control_plane
    print("VERSIONS:", own.version, control_plane_upgrade.to_version, cluster.version)
    print("OWN:", own.server != cluster.server)
'''

WRONG_MARKERS = '''
import pytest

@pytest.mark.ktest_upgrade("1.36")
def test_positional(control_plane_upgrade):
    pass

@pytest.mark.ktest_upgrade(form="1.36")
def test_misspelt(control_plane_upgrade):
    pass

@pytest.mark.ktest_upgrade(apiserver_flags="--v=2")
def test_flags_as_a_string(control_plane_upgrade):
    pass
'''

ON_KIND = '''
def test_upgrade_on_kind(control_plane_upgrade):
    pass
'''


@pytest.mark.own_plane("the session's own embedded plane (control_plane), which a warm one is not")
def test_the_session_plane_is_refused_naming_who_shares_it(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    result = run_inner(pytester, SESSION_PLANE, "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*REFUSED: cannot upgrade this control plane: the test session's cluster (every test and xdist "
        "worker) uses it, and an upgrade under them would restart their API server mid-test*"
        "control_plane_upgrade fixture*"
    ])


def test_control_plane_upgrade_is_a_plane_of_the_tests_own_at_the_previous_minor(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    result = run_inner(pytester, OWN_PLANE, "-s")
    result.assert_outcomes(passed=1)
    [versions] = [line.partition("VERSIONS:")[2] for line in result.outlines if "VERSIONS:" in line]
    own, to, session = versions.split()
    assert to == session.rpartition(".")[0]  # to the session's minor...
    major, minor = (int(part) for part in to.split("."))
    assert own.startswith(f"{major}.{minor - 1}.")  # ...from the one before
    result.stdout.fnmatch_lines(["*OWN: True*"])


def test_a_wrong_ktest_upgrade_marker_fails_saying_how_to_write_it(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    result = run_inner(pytester, WRONG_MARKERS)
    result.assert_outcomes(errors=3)
    assert "During handling of the above exception" not in result.stdout.str()  # said once
    result.stdout.fnmatch_lines_random([
        'ktest_upgrade takes keyword arguments only: @pytest.mark.ktest_upgrade(from_="1.36", to="1.37")',
        "ktest_upgrade does not know form; it takes from_, to and apiserver_flags*",
        "*ktest_upgrade's apiserver_flags is a list, e.g. ?'--v=2'?, not a string",
    ])


def test_on_kind_the_fixture_says_kind_cannot_upgrade_in_place(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    result = run_inner(pytester, ON_KIND, "-rs", "--ktest-backend", "kind")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*control_plane_upgrade needs backend bare: kind cannot upgrade a cluster in place*",
    ])
    result.stdout.fnmatch_lines(["*Run this test with --ktest-backend bare*"])
