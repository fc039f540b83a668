"""The whole session's requests: each process records what every operator proxy sees and writes
its file to the session's directory; the process that owns the session merges the files, writes
the merged record and the derived rules, and judges the shipped roles."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ktest.base.procfs import write_private_file
from ktest.proxy.traffic import observe_requests
from ktest.rbac_audit.compare import RbacComparison, ShippedRule, compare_rules
from ktest.rbac_audit.derive import derived_yaml
from ktest.rbac_audit.needs import RequestRecord, merged

if TYPE_CHECKING:
    from ktest.proxy.api_request import ApiRequest

REQUESTS_FILE = "requests.json"
DERIVED_FILE = "derived-rules.yaml"
PARTS_DIRECTORY = "parts"


class SessionRecorder:
    """Records every operator request of this process while it runs; ``test`` is the test now
    running (named in a missing rule's evidence)."""

    def __init__(self) -> None:
        self.record = RequestRecord()
        self.test: str | None = None
        self._stop = observe_requests(self._seen)

    def _seen(self, operator: str, request: ApiRequest) -> None:
        self.record.add(operator, request, self.test)

    def stop(self) -> None:
        """Stop recording (the record stays)."""
        self._stop()

    def finish(self, path: Path) -> Path:
        """Stop recording and write this process's record to ``path``."""
        self.stop()
        return self.record.write(path)


@dataclass
class SessionVerdict:
    """The merged record, where it and the derived rules were written, and the judgement."""

    record: RequestRecord
    requests_file: Path
    derived_file: Path
    comparison: RbacComparison

    def describe(self) -> str:
        return (f"{len(self.record)} permission(s) needed by the recorded operator requests; derived rules: "
                f"{self.derived_file} (merge shards with `ktest rbac report {self.requests_file} ...`)\n"
                + self.comparison.describe())


def judge(directory: Path, rules: list[ShippedRule]) -> SessionVerdict:
    """Merge every part file under ``directory``, write the merged record and the derived rules
    beside them, and compare with ``rules``."""
    record = merged(sorted((directory / PARTS_DIRECTORY).glob("*.json")))
    requests_file = record.write(directory / REQUESTS_FILE)
    needs = record.needs()
    derived_file = directory / DERIVED_FILE
    write_private_file(derived_file, derived_yaml(needs))
    return SessionVerdict(record, requests_file, derived_file, compare_rules(needs, rules))

