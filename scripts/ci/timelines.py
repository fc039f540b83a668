"""The failed tests' timelines in the job summary: ``timelines.py --dir DIR --artifact NAME
[--url URL] >> $GITHUB_STEP_SUMMARY``.

ktest writes one self-contained HTML page per failing test under ``<artifacts>/timelines``
(setting ``ktest_timeline``, on failure by default); the workflow uploads that directory as the
artifact NAME. This prints a Markdown list of the pages: the test each one shows (read from the
data the page embeds), its path in the artifact, and whether the recording was cut. Prints nothing
when there is no page (the job failed before a test did).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gha import CIError, fail

_DATA = re.compile(
    r'<script type="application/json" id="ktest-timeline-data">(?P<json>.*?)</script>', re.DOTALL
)


@dataclass(frozen=True)
class Page:
    path: Path
    test: str
    note: str = ""


def read_page(path: Path) -> Page:
    """The test a page shows; a page whose data cannot be read is still listed, with why."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        return Page(path, path.stem, f"unreadable: {error.strerror or error}")
    found = _DATA.search(text)
    if found is None:
        return Page(path, path.stem, "no embedded timeline data (not a ktest timeline, or cut while written)")
    try:
        data = json.loads(found.group("json"))
    except ValueError as error:
        return Page(path, path.stem, f"its embedded data is not JSON ({error})")
    if not isinstance(data, dict):
        return Page(path, path.stem, "its embedded data is not a timeline")
    note = ""
    truncated = data.get("truncated")
    if isinstance(truncated, dict):
        note = f"the recording stops at {truncated.get('at')} s: {truncated.get('reason')}"
    return Page(path, str(data.get("test") or path.stem), note)


def find_pages(directory: Path) -> list[Page]:
    if directory.exists() and not directory.is_dir():
        raise CIError(f"{directory} is not a directory: pass the timelines directory (<artifacts>/timelines)")
    return [read_page(path) for path in sorted(directory.rglob("*.html"))] if directory.is_dir() else []


def render(pages: Sequence[Page], directory: Path, artifact: str, url: str = "") -> str:
    if not pages:
        return ""
    name = f"[{html.escape(artifact)}]({url})" if url else f"`{html.escape(artifact)}`"
    lines = [
        f"### Failure timelines ({len(pages)})",
        "",
        f"One self-contained HTML page per failed test, in the artifact {name}: download it and open a "
        "page in any browser (it needs no network).",
        "",
    ]
    for page in pages:
        relative = page.path.relative_to(directory).as_posix()
        note = f" ({html.escape(page.note)})" if page.note else ""
        lines.append(f"- {html.escape(page.test)}: `{html.escape(relative)}`{note}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="the timelines directory")
    parser.add_argument("--artifact", required=True, help="the name of the artifact holding it")
    parser.add_argument("--url", default="", help="the artifact's URL (upload-artifact's artifact-url)")
    args = parser.parse_args(argv)
    try:
        pages = find_pages(args.dir)
    except CIError as error:
        return fail(error)
    sys.stdout.write(render(pages, args.dir, args.artifact, args.url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
