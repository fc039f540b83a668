"""Building a Go operator once: cache key from the sources, no rebuild when unchanged, clear errors."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
from operator_helpers import GO_MANAGER

from ktest.assets.progress import Progress
from ktest.errors import OperatorError
from ktest.operators import build_go_binary, plan_go_build


def copy_module(tmp_path: Path) -> Path:
    target = tmp_path / "go-manager"
    shutil.copytree(GO_MANAGER, target)
    return target


def test_unchanged_sources_are_not_rebuilt(go_manager: Path) -> None:
    before = go_manager.stat()
    again = build_go_binary(GO_MANAGER)
    assert again == go_manager
    after = again.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert plan_go_build(GO_MANAGER).cached


def test_cache_key_follows_the_go_sources_only(tmp_path: Path) -> None:
    original = plan_go_build(GO_MANAGER)
    copy = copy_module(tmp_path)
    assert plan_go_build(copy).binary == original.binary  # same sources, same key, wherever they are
    (copy / "README.md").write_text("docs do not change the binary\n")
    (copy / "main_test.go").write_text("package main\n")
    assert plan_go_build(copy).binary == original.binary
    with (copy / "main.go").open("a") as file:
        file.write("\n// a change\n")
    assert plan_go_build(copy).binary != original.binary
    assert plan_go_build(GO_MANAGER, ldflags="-s -w").binary != original.binary
    # like the user's own `go build` (so their warm Go cache is reused), unless asked to be reproducible
    assert "-trimpath" not in original.command and "-v" in original.command
    assert original.env.get("CGO_ENABLED") == os.environ.get("CGO_ENABLED")
    reproducible = plan_go_build(GO_MANAGER, reproducible=True)
    assert "-trimpath" in reproducible.command and reproducible.env["CGO_ENABLED"] == "0"
    assert reproducible.binary != original.binary


def test_compile_error_is_reported_with_the_compiler_output(tmp_path: Path) -> None:
    copy = copy_module(tmp_path)
    (copy / "broken.go").write_text('package main\n\nfunc broken() int { return "not an int" }\n')
    with pytest.raises(OperatorError) as raised:
        build_go_binary(copy, cache_dir=tmp_path / "cache")
    message = str(raised.value)
    assert "building the Go operator" in message and "failed" in message
    assert "broken.go:3" in message
    assert not list((tmp_path / "cache").glob("*/go-manager"))  # nothing half-installed


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(OperatorError, match=r"has no go\.mod"):
        build_go_binary(tmp_path)
    with pytest.raises(OperatorError, match="'go' command was not found"):
        build_go_binary(GO_MANAGER, env={"PATH": str(tmp_path)})
    assert os.environ.get("PATH")  # the caller's environment is untouched


@pytest.mark.slow
def test_a_build_shows_progress_and_says_where_the_binary_and_log_are(
    go_manager: Path, tmp_path: Path
) -> None:
    copy = copy_module(tmp_path)
    stream = io.StringIO()
    binary = build_go_binary(copy, cache_dir=tmp_path / "cache", progress=Progress(stream=stream))
    log = binary.parent / "build.log"
    output = stream.getvalue()
    assert (
        f"ktest: building Go operator go-manager from {copy} (once; cached afterwards): binary {binary}, "
        f"log {log}" in output
    )
    assert "ktest: building Go operator go-manager ... done in" in output
    assert log.read_text().startswith("$ ") and " build -v " in log.read_text()
    stream.truncate(0)
    assert build_go_binary(copy, cache_dir=tmp_path / "cache", progress=Progress(stream=stream)) == binary
    assert stream.getvalue() == ""  # cached: nothing to say
