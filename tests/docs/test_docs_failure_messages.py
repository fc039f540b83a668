"""The failure messages docs/getting-started.md shows are what ktest prints: its failing
examples run in a child pytest session against the shared control plane, and each message
must equal the page's block after it, once times, counts and generated names are normalised.

``KTEST_UPDATE_DOCS=1`` writes the messages of this run into the page instead (then review the
diff and commit it).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest
from inner_runs import run_inner

from ktest.controlplane import ControlPlane

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
EXAMPLE = re.compile(
    r'<!-- docs-test: skip failure example "(?P<name>\w+)":[^\n]*-->\n```python\n(?P<source>.*?)\n```', re.S
)
MESSAGE = re.compile(
    r"(?P<head><!-- failure-message: (?P<name>\w+) -->\n```text\n)(?P<text>.*?)(?P<tail>```)", re.S
)
NORMALISE = [
    (re.compile(r"\d+\.\d+s\b"), "<seconds>"),
    (re.compile(r"\d+(\.\d+)?ms\b"), "<ms>"),
    (re.compile(r"\b\d+ (attempt|wake-up)s?\b"), r"<n> \1s"),  # 1 or more: a count that varies by run
    (re.compile(r"\battempt \d+\b"), "attempt <n>"),
    (re.compile(r"\btest-[a-z0-9-]+-[0-9a-f]{6}\b"), "<namespace>"),
    (re.compile(r"\d\d:\d\d:\d\d(\.\d+)?"), "<time>"),
    (re.compile(r"(/[^\s:/]+)+/(test_\w+\.py)"), r"\2"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"0x[0-9a-f]+"), "0x<id>"),
    (re.compile(r"/\S*/ktest-operator-\w+/"), "<log directory>/"),
]
ADMIN_CONTEXT = "ktest-admin@ktest"
UPDATE = bool(os.environ.get("KTEST_UPDATE_DOCS"))  # read now: the inner run's fixture clears KTEST_*


def normalised(text: str) -> str:
    """``text`` without what differs between runs, machines and Python versions: times,
    counts, names, paths, ktest's own traceback frames, the carets under a traceback's line."""
    kept: list[str] = []
    frame_indent = None
    for line in text.strip("\n").splitlines():
        body = line[1:] if line.startswith("E") else line
        indent = len(body) - len(body.lstrip())
        if frame_indent is not None and indent > frame_indent:
            continue  # the source lines of a frame of ktest's own
        frame_indent = indent if re.match(r'\s*File ".*/ktest/', body) else None
        if frame_indent is None and not re.fullmatch(r"\s*[~^]+\s*", body):
            kept.append(line.rstrip())
    text = "\n".join(kept)
    for pattern, replacement in NORMALISE:
        text = pattern.sub(replacement, text)
    return text


def messages(output: list[str]) -> dict[str, str]:
    """Per failing test function: its ``E`` lines, as pytest printed them."""
    found: dict[str, list[str]] = {}
    current = None
    for line in output:
        header = re.match(r"^_+ (test_\w+) _+$", line)
        if header:
            current = found.setdefault(header.group(1), [])
        elif current is not None and line.startswith("E "):
            current.append(line.rstrip())
        elif re.match(r"^[=]+ ", line):
            current = None
    return {name: "\n".join(lines) for name, lines in found.items()}


def test_the_failure_messages_of_the_getting_started_page_are_real(
    pytester: pytest.Pytester, inner_env: dict[str, str], plane: ControlPlane
) -> None:
    page = PAGE.read_text()
    examples = {match["name"]: match["source"] for match in EXAMPLE.finditer(page)}
    shown = {match["name"]: match["text"] for match in MESSAGE.finditer(page)}
    assert set(examples) == {"comparison", "assertion", "crash"} and set(shown) == set(examples)
    pytester.makepyfile(**{f"test_{name}": source for name, source in examples.items()})
    existing = ["--ktest-backend=existing", f"--ktest-kubeconfig={plane.kubeconfig}",
                f"--ktest-context={ADMIN_CONTEXT}"]
    result = run_inner(pytester, "", *existing)
    result.assert_outcomes(failed=3)
    by_function = messages(result.outlines)
    printed = {name: by_function.get(re.findall(r"^def (test_\w+)", source, re.M)[0], "")
               for name, source in examples.items()}
    if UPDATE:
        def readable(text: str) -> str:  # the run's directory and ktest's as a reader's would be
            text = text.replace(f"{pytester.path}/", "")
            return text.replace(f"{PAGE.parents[1]}/ktest/", "site-packages/ktest/")

        def rewritten(block: re.Match[str]) -> str:
            return block["head"] + readable(printed[block["name"]]) + "\n" + block["tail"]

        PAGE.write_text(MESSAGE.sub(rewritten, page))
        return
    for name in examples:
        assert printed[name], f"example {name!r} printed no failure:\n" + "\n".join(result.outlines)
        expected, actual = normalised(shown[name]), normalised(printed[name])
        diff = "\n".join(
            difflib.unified_diff(expected.splitlines(), actual.splitlines(), "page", "run", lineterm="")
        )
        assert expected == actual, (
            f"docs/getting-started.md's {name!r} message differs from what ktest prints "
            f"(KTEST_UPDATE_DOCS=1 rewrites it from a run):\n{diff}"
        )
