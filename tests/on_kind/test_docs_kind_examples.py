"""The docs' ``backend=kind`` blocks (docs/kind.md, docs/tutorials/kind-images.md), run as a
user runs them: a child ``pytest --ktest-backend kind`` session in the page's project.

The child attaches to this session's kind cluster instead of creating another: it is run
with ``--ktest-reuse`` and a state directory of its own whose one record is this cluster,
marked kept (what ``ktest up --backend kind`` leaves), so the child finds it, uses it, and
leaves it running as it leaves every kept cluster; this session deletes it as usual.
Under another backend the ``kind`` fixture skips each page with the reason (the bare run of
tests/docs leaves these blocks out, and tests/docs checks each is one this module runs).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from ktest.backends.kind import records
from ktest.backends.kind.handle import KindHandle

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))
from docs_blocks import ROOT, pages
from docs_runner import CHILD_TIMEOUT, page_blocks, run_page

KIND_PAGES = [page for page in pages() if page_blocks(page, "kind")]

pytestmark = pytest.mark.ktest_nodes


def _kept_view_of(kind: KindHandle, state_home: Path) -> Path:
    """A state directory whose only kind record is this session's cluster, marked kept."""
    record = records.read_record(kind.name)
    assert record is not None, f"no ktest record of kind cluster {kind.name} in {records.records_directory()}"
    directory = state_home / "ktest" / "kind"
    records.write_record(dataclasses.replace(record, kept=True, purpose="up"), directory)
    return directory


@pytest.mark.timeout(CHILD_TIMEOUT + 120)
@pytest.mark.parametrize("page", KIND_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_page_kind_examples_run(
    page: Path, kind: KindHandle, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    state_home = tmp_path / "state"
    _kept_view_of(kind, state_home)
    output = run_page(
        page,
        tmp_path / "project",
        pytestconfig,
        backend="kind",
        args=["--ktest-backend", "kind", "--ktest-reuse"],
        env={"XDG_STATE_HOME": str(state_home)},
    )
    attached = f"attached to kept kind cluster {kind.name}"
    assert attached in output, f"the child made a cluster of its own:\n{output}"
    assert kind.nodes, f"kind cluster {kind.name} did not outlive the child session"
