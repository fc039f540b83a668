"""Progress lines: what a CI log shows for a long step."""

from __future__ import annotations

import io

import pytest

from ktest.assets.progress import Progress, format_bytes, format_duration


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.42, "0.4s"), (9.96, "10.0s"), (42, "42s"), (192.4, "3m12s")]
)
def test_durations_read_like_a_clock(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_bytes_use_binary_units() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 1024 * 1024) == "3.0 MiB"


def test_step_prints_start_and_outcome_with_elapsed_time() -> None:
    stream = io.StringIO()
    progress = Progress(stream=stream)
    with progress.step("building kube-apiserver v1.37.2 from Go modules, first time only"):
        pass
    lines = stream.getvalue().splitlines()
    assert lines[0] == "ktest: building kube-apiserver v1.37.2 from Go modules, first time only ..."
    assert lines[-1].startswith(
        "ktest: building kube-apiserver v1.37.2 from Go modules, first time only ... done in "
    )


def test_failed_step_says_so() -> None:
    stream = io.StringIO()
    with pytest.raises(RuntimeError), Progress(stream=stream).step("building etcd"):
        raise RuntimeError("boom")
    assert "building etcd ... failed after" in stream.getvalue()


def test_disabled_progress_writes_nothing() -> None:
    stream = io.StringIO()
    progress = Progress(enabled=False, stream=stream)
    progress.note("hello")
    with progress.step("x"):
        progress.transferred("file", 10, 10)
    assert stream.getvalue() == ""
