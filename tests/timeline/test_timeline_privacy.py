"""What a timeline page gives away and where it goes (issue 50.8): a Secret's values only as
length and hash, pages 0600, never written through another user's symlink or directory, and one
page per test even when parameters differ only in characters a file name cannot hold."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_directories import directory_in_tmp
from test_timeline_plugin import page_data, timelines

from ktest.cluster import Cluster
from ktest.timeline import recording
from ktest.timeline.model import TimelineData
from ktest.timeline.rendering import write_page
from ktest.wait import eventually

OTHER_UID = 65534
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="needs root to make another user's files")

PASSWORD = "hunter2-correct-horse"
TOKEN = "tok-9f8e7d6c5b4a"


def _secret(ns: str, password: str) -> dict:
    last_applied = json.dumps({"stringData": {"password": password}})  # as kubectl apply keeps it
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "creds",
            "namespace": ns,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied},
        },
        "data": {"password": base64.b64encode(password.encode()).decode()},
        "stringData": {"token": TOKEN},
    }


def test_a_secrets_values_are_shown_as_length_and_hash_only(admin: Cluster, ns: str, tmp_path: Path) -> None:
    """Was: every value on the page, base64 and in the last-applied annotation, in a 0644 file."""
    with recording(admin, test="secret") as rec:
        admin.create(_secret(ns, PASSWORD))
        changed = {"data": {"password": base64.b64encode(b"other").decode()}}
        admin.patch(("v1", "Secret", "creds", ns), changed)
        eventually(
            lambda: sum(
                event.kind == "watch-event" and "secrets" in event.label for event in rec.data().events
            ) >= 2,
            timeout=10,
            description="both writes of the Secret in the recording",
        )
    page = rec.write(tmp_path / "t.html")
    text = page.read_text()
    for value in (PASSWORD, base64.b64encode(PASSWORD.encode()).decode(), TOKEN, "b3RoZXI="):
        assert value not in text, f"{value!r} is on the page"
    rows = [
        row
        for event in page_data(page)["events"]
        if event["kind"] == "watch-event" and "secrets" in event["detail"]["object"]
        for row in event["detail"]["diff"]
    ]
    shown = {row["path"]: row for row in rows}
    assert json.loads(shown["data.password"]["old"]).startswith(f"(hidden: {len(PASSWORD)} bytes, sha256 ")
    assert json.loads(shown["data.password"]["new"]).startswith("(hidden: 5 bytes, sha256 "), shown
    assert page.stat().st_mode & 0o777 == 0o600


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory in /tmp, removed afterwards."""
    with directory_in_tmp("ktest-timeline-test-") as path:
        yield path


def _page() -> TimelineData:
    return TimelineData(test="t", started_wall=0.0)


@needs_root
def test_a_timelines_symlink_of_another_user_is_not_followed(shared: Path) -> None:
    artifacts = shared / "artifacts"
    artifacts.mkdir()
    elsewhere = shared / "theirs"
    elsewhere.mkdir()
    (artifacts / "timelines").symlink_to(elsewhere)
    os.lchown(artifacts / "timelines", OTHER_UID, OTHER_UID)
    with pytest.raises(PermissionError) as caught:
        write_page(_page(), artifacts / "timelines" / "t.html")
    message = str(caught.value)
    assert f"through {artifacts / 'timelines'}: a symlink of uid 65534" in message and "Remove it" in message
    assert list(elsewhere.iterdir()) == []


@needs_root
def test_an_artifacts_directory_of_another_user_is_refused(shared: Path) -> None:
    artifacts = shared / "artifacts"
    artifacts.mkdir(mode=0o777)
    os.chown(artifacts, OTHER_UID, OTHER_UID)
    with pytest.raises(PermissionError) as caught:
        write_page(_page(), artifacts / "timelines" / "t.html")
    message = str(caught.value)
    assert f"in {artifacts}: {artifacts} (owner nobody (uid 65534)" in message
    assert "ktest_artifacts (--ktest-artifacts)" in message
    assert list(artifacts.iterdir()) == []


def test_a_page_is_private_and_an_own_symlink_is_followed(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    (tmp_path / "timelines").symlink_to(target)
    write_page(_page(), tmp_path / "timelines" / "t.html")
    assert (target / "t.html").stat().st_mode & 0o777 == 0o600


PARAMETERS = """
import pytest


@pytest.mark.parametrize("case", ["a/b", "a b", "a_b"])
def test_case(cluster, namespace, case):
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, namespace=namespace)
    assert False, case
"""


def test_parameters_a_file_name_cannot_hold_get_a_page_each(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    """Was: ``test_case[a/b]``, ``[a b]`` and ``[a_b]`` all written to one page,
    ``test_inner.py_test_case_a_b.html``."""
    pytester.makepyfile(test_inner=PARAMETERS)
    artifacts = pytester.path / "artifacts"
    result = pytester.runpytest_inprocess(f"--ktest-artifacts={artifacts}")
    result.assert_outcomes(failed=3)
    pages = timelines(artifacts)
    assert len(pages) == 3 and all(name.startswith("test_inner.py_test_case_a_b-") for name in pages), pages
    tests = {page_data(artifacts / "timelines" / name)["test"] for name in pages}
    assert tests == {f"test_inner.py::test_case[{case}]" for case in ("a/b", "a b", "a_b")}
