"""``ktest rbac report FILES...``: the least-privilege rules the recorded requests needed, as YAML
(the files: ``<artifacts>/rbac/requests.json`` of sessions run with ``ktest_rbac``, e.g. one per CI
shard, merged); ``--against ROLES`` also judges the shipped roles (exit 1 on a missing rule)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_MISSING = 1


def register(subparsers: Any) -> dict[str, argparse.ArgumentParser]:
    rbac = subparsers.add_parser("rbac", help="RBAC derived from the operator requests sessions recorded")
    rbac.set_defaults(help_parser=rbac)
    verbs = rbac.add_subparsers(title="subcommands", metavar="SUBCOMMAND")
    report = verbs.add_parser(
        "report",
        help="merge request records (xdist workers, CI shards) and print the rules they needed as YAML",
    )
    report.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="requests.json files written by sessions run with ktest_rbac")
    report.add_argument("--against", type=Path, metavar="ROLES",
                        help="the operator's shipped roles (file or directory): list missing, unused and "
                             "wildcard rules on stderr; exit 1 if a rule is missing")
    report.add_argument("--name", default="ktest-derived", help="metadata.name of the printed roles")
    report.set_defaults(handler=report_from_args)
    return {"rbac": rbac, "rbac report": report}


def report_from_args(args: argparse.Namespace) -> int:
    from ktest.rbac_audit.compare import compare_rules, shipped_rules
    from ktest.rbac_audit.derive import derived_yaml
    from ktest.rbac_audit.needs import merged

    record = merged(args.files)
    rules = shipped_rules(args.against) if args.against is not None else None
    needs = record.needs()
    sys.stdout.write(derived_yaml(needs, args.name))
    if rules is None:
        return 0
    comparison = compare_rules(needs, rules)
    print(comparison.describe(), file=sys.stderr)
    return 0 if comparison.ok else EXIT_MISSING
