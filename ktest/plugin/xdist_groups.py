"""``--dist loadgroup`` on pytest 9.2 and later: keep ``xdist_group`` marks working.

pytest-xdist tells its scheduler a test's group by appending ``@<group>`` to the test's node
id on the worker, writing ``item._nodeid``. pytest 9.2 keeps node ids as a structured ``_id``
and no longer reads ``_nodeid``, so the groups are silently dropped and grouped tests spread
over the workers (pytest-xdist issue 1386). ktest's advice for tests that change a shared CRD
(and its own kind clusters) depends on the groups, so, on a worker where the suffix did not
take, this hook sets it where pytest now reads it. It acts only then: with an xdist that
writes the id pytest reads, it finds every suffix in place and changes nothing.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own suffixing
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = sorted({group_name(mark) for mark in item.iter_markers("xdist_group")})
        if not groups:
            continue
        suffix = "@" + "_".join(groups)
        if item.nodeid.endswith(suffix):
            continue
        set_node_id(item, item.nodeid + suffix)


def group_name(mark: pytest.Mark) -> str:
    """The group an ``xdist_group`` mark names, as pytest-xdist reads it."""
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def set_node_id(item: pytest.Item, nodeid: str) -> None:
    """Give ``item`` the node id ``nodeid`` through pytest's structured id (9.2 and later)."""
    try:
        from _pytest.nodeid import NodeId  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # before 9.2: pytest-xdist's own write took effect
        return
    if hasattr(item, "_id"):
        item._id = NodeId.parse(nodeid)
