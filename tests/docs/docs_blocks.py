"""The code blocks of README.md and docs/**/*.md, and what each one is, for the docs tests.

A page is a small project: its blocks are written to one directory and its Python runs in one
child pytest session with ktest's plugin, against a real control plane. What a block is comes
from the comment right before it (the fence's own info string cannot carry it on GitHub):

* ``<!-- docs-test: file=NAME -->``: the block is the file NAME of the page's project (an
  operator module, a ``pytest.ini``, a CRD, a test file). A ``test_*.py`` file is collected
  by the child pytest session; other files are there for the tests to import or read.
* ``<!-- docs-test: backend=kind -->`` (with ``file=`` or alone): the block needs that backend
  (real nodes, a Docker engine): the bare run leaves it out, counted, and
  ``tests/on_kind/test_docs_kind_examples.py`` runs it in the kind layer of ``make test``.
* ``<!-- docs-test: link=NAME:PATH -->``: the page's project gets NAME, a link to the repository's
  PATH (a Go manager the page builds, its configurations), as the reader's project has its own.
  Words combine: ``<!-- docs-test: file=test_x.py link=manager:fixtures/go-manager -->``.
* ``<!-- docs-test: copy=NAME:PATH -->``: the page's project gets a copy of the repository's PATH
  as NAME (``.``: the project itself is a copy of PATH, e.g. a kubebuilder project that the
  page's tests sit inside, as a reader's tests sit inside theirs).
* ``<!-- docs-test: skip REASON -->``: not run; REASON says why (kept rare).
* no comment: a ``python`` block that defines ``test_...`` functions is a test file of its
  own; any other ``python`` block becomes the body of a test with those of the ``cluster`` and
  ``namespace`` fixtures it uses (none for plain Python that starts its own control plane:
  its child session then starts no other); ``ini``/``toml``/``yaml``/``json`` blocks must
  parse; ``sh`` blocks may only use commands, subcommands, options, extras and make targets
  that exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(?P<what>.*?)\s*-->")
WORD = re.compile(r"(?P<key>file|backend|link|copy)=(?P<value>\S+)")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text and its directive."""

    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    file: str | None = None
    skip: str | None = None
    backend: str | None = None
    links: tuple[tuple[str, str], ...] = ()
    copies: tuple[tuple[str, str], ...] = ()

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """README.md and every Markdown page of the docs site (docs/pypi.md is PyPI's page)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The page's fenced code blocks, in order, with the directive before each (if any)."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][len(indent):] if lines[end].startswith(indent) else lines[end].lstrip())
            end += 1
        if end == len(lines):
            raise ValueError(f"{page.relative_to(ROOT)}:{index + 1}: code block never closed")
        where = f"{page.relative_to(ROOT)}:{index + 1}"
        words = _words(where, _directive_before(lines, index))
        found.append(
            Block(
                page=page,
                line=index + 1,
                language=opening["info"].strip().split(" ")[0].lower(),
                text="\n".join(body) + "\n",
                **words,
            )
        )
        index = end + 1
    return found


def _words(where: str, directive: re.Match[str] | None) -> dict[str, Any]:
    """The directive's words as Block fields; an unknown word is an error naming the page and line."""
    if directive is None:
        return {}
    what = directive["what"]
    if what == "skip" or what.startswith("skip "):
        return {"skip": what[4:].strip(" :-") or "(no reason)"}
    words: dict[str, Any] = {}
    paths: dict[str, list[tuple[str, str]]] = {"link": [], "copy": []}
    for word in what.split():
        match = WORD.fullmatch(word)
        if not match:
            raise ValueError(
                f"{where}: unknown docs-test word {word!r} (known: file=NAME, backend=NAME, "
                "link=NAME:PATH, copy=NAME:PATH, or skip REASON)"
            )
        if match["key"] in paths:
            name, _, path = match["value"].partition(":")
            if not path or not (ROOT / path).exists():
                raise ValueError(f"{where}: {match['key']}={match['value']}: no repository path {path!r}")
            paths[match["key"]].append((name, path))
        else:
            words[match["key"]] = match["value"]
    return {**words, "links": tuple(paths["link"]), "copies": tuple(paths["copy"])}


def _directive_before(lines: list[str], index: int) -> re.Match[str] | None:
    previous = index - 1
    while previous >= 0 and not lines[previous].strip():
        previous -= 1
    return DIRECTIVE.search(lines[previous]) if previous >= 0 else None
