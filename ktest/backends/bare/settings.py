"""Backend bare's own settings rows: ``ktest_nodes``, its simulated nodes (:mod:`ktest.nodes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.config_values import Spec, setting
from ktest.errors import ConfigError

if TYPE_CHECKING:
    from ktest.config import Settings
    from ktest.config_values import Source

MAX_NODES = 5000


def parse_node_count(text: str, spec: Spec, source: Source) -> int:
    """A whole number of simulated nodes, 0 (none) to :data:`MAX_NODES`."""
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_NODES:
        raise ConfigError(
            f"{source.label}: {text!r} is not a valid {spec.name}; give a whole number of simulated "
            f"nodes from 0 (none: no Pod is ever scheduled) to {MAX_NODES}, e.g. 3"
        )
    return value


# fmt: off
ROWS: tuple[Spec, ...] = (
    setting("nodes", parse_node_count,
             "simulated nodes on backend bare (kube-scheduler + KWOK): Pods are scheduled, run and become "
             "Ready without Docker; 0: none", "0", metavar="COUNT"),
)
# fmt: on


def describe(settings: Settings) -> list[str]:
    """The session header's part: the simulated nodes, when there are any."""
    return [f"nodes={settings.nodes}"] if getattr(settings, "nodes", None) else []
