"""The job summary of a ktest matrix: ``summary.py [--title T] JUNIT_XML... >> $GITHUB_STEP_SUMMARY``.

Totals per matrix cell, then a table of the failed tests and, for each, an
excerpt of ktest's failure report (``ktest: ...`` properties that ``ktest_junit.py``
put into the JUnit XML: the namespace's objects and events, the operator's log
tail) and of the failure itself. Each cell is named after its file
(``junit-1.37-bare-1of2.xml`` -> ``1.37-bare-1of2``).
"""

from __future__ import annotations

import argparse
import html
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gha import CIError, fail

SECTION_PREFIX = "ktest: "
EXCERPT_LINES = 30
EXCERPT_CHARS = 4000
# GitHub accepts up to 1 MiB of summary per step; stay well below it.
SUMMARY_LIMIT = 900_000


@dataclass
class Failure:
    test: str
    cell: str
    kind: str  # "failure" or "error"
    message: str
    details: str
    sections: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class CellTotals:
    cell: str
    tests: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0


def cell_name(path: Path) -> str:
    return path.stem.removeprefix("junit-").removeprefix("junit") or path.stem


def read_junit(path: Path) -> tuple[CellTotals, list[Failure]]:
    """Totals and failures of one JUnit XML file; CIError naming the file when it is not JUnit XML."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as error:
        raise CIError(f"cannot read JUnit XML {path}: {error}") from error
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if root.tag not in ("testsuite", "testsuites"):
        raise CIError(f"{path} is not JUnit XML (root element <{root.tag}>)")
    cell = cell_name(path)
    totals = CellTotals(cell)
    failures: list[Failure] = []
    for suite in suites:
        for case in suite.iter("testcase"):
            totals.tests += 1
            test = _test_id(case)
            if case.find("skipped") is not None:
                totals.skipped += 1
            for kind in ("failure", "error"):
                for outcome in case.findall(kind):
                    if kind == "failure":
                        totals.failed += 1
                    else:
                        totals.errors += 1
                    failures.append(Failure(
                        test=test,
                        cell=cell,
                        kind=kind,
                        message=outcome.get("message", "").strip(),
                        details=(outcome.text or "").strip(),
                        sections=_sections(case),
                    ))
    return totals, failures


def _test_id(case: ET.Element) -> str:
    """``tests.test_x.TestA::test_y``: pytest's classname (dotted module and class) and test name."""
    classname, name = case.get("classname", ""), case.get("name", "")
    return f"{classname}::{name}" if classname else name


def _sections(case: ET.Element) -> list[tuple[str, str]]:
    return [
        (prop.get("name", "").removeprefix(SECTION_PREFIX), prop.get("value", ""))
        for prop in case.iter("property")
        if prop.get("name", "").startswith(SECTION_PREFIX)
    ]


def excerpt(text: str, lines: int = EXCERPT_LINES, chars: int = EXCERPT_CHARS) -> str:
    """The last ``lines`` lines (at most ``chars`` characters), saying how much was left out."""
    all_lines = text.rstrip().splitlines()
    kept = all_lines[-lines:]
    body = "\n".join(kept)
    if len(body) > chars:
        body = body[-chars:]
    left_out = len(all_lines) - len(kept)
    return (f"[... {left_out} earlier lines left out]\n" if left_out > 0 else "") + body


def _cell_text(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    if len(first) > 200:
        first = first[:197] + "..."
    return html.escape(first).replace("|", "\\|") or "-"


def _fence(text: str) -> str:
    fence = "~~~~" if "```" in text else "```"
    return f"{fence}text\n{text}\n{fence}"


def render(totals: Sequence[CellTotals], failures: Sequence[Failure], title: str) -> str:
    """The summary's Markdown."""
    tests = sum(t.tests for t in totals)
    broken = sum(t.failed + t.errors for t in totals)
    outcome = f"{broken} failed of {tests} tests" if broken else f"all {tests} tests passed"
    lines = [f"## {title}: {outcome}"]
    lines += ["", "| cell | tests | failed | errors | skipped |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {t.cell} | {t.tests} | {t.failed} | {t.errors} | {t.skipped} |" for t in totals]
    if not failures:
        return "\n".join(lines) + "\n"
    lines += ["", "| test | cell | failure |", "| --- | --- | --- |"]
    lines += [
        f"| `{f.test}` | {f.cell} | {_cell_text(f.message or f.details)} |" for f in failures
    ]
    for f in failures:
        heading = f"{html.escape(f.test)} ({html.escape(f.cell)}, {f.kind})"
        lines += ["", f"<details><summary>{heading}</summary>", ""]
        for name, text in f.sections:
            lines += [f"**ktest: {html.escape(name)}**", "", _fence(excerpt(text)), ""]
        lines += [f"**{f.kind}**", "", _fence(excerpt(f.details or f.message)), "", "</details>"]
    text = "\n".join(lines) + "\n"
    if len(text) > SUMMARY_LIMIT:
        cut = text[:SUMMARY_LIMIT].rsplit("\n<details>", 1)[0]
        text = cut + "\n\n(summary cut at the size GitHub accepts; the JUnit XML artifacts have the rest)\n"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--title", default="ktest")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args(argv)
    if not args.files:
        print(f"## {args.title}: no JUnit XML was produced (did every job fail before pytest ran?)")
        return 0
    try:
        results = [read_junit(path) for path in sorted(args.files)]
    except CIError as error:
        return fail(error)
    totals = [cell for cell, _ in results]
    failures = [failure for _, found in results for failure in found]
    sys.stdout.write(render(totals, failures, args.title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
