"""The reference pages under docs/reference/ as plain Markdown, for readers on GitHub.

The site build writes each page's reference from the code (docs/hooks.py, at each
``<!-- ktest-reference: NAME -->``). On GitHub nothing is built, so each page also carries the
same reference, committed after its placeholder up to ``<!-- ktest-reference-end: NAME -->``:

    python scripts/reference_pages.py          # or: make reference   (rewrites the pages)
    python scripts/reference_pages.py --check  # exit 1 naming the pages that are out of date

``tests/docs/test_docs_reference.py`` runs the check. The API page's committed form is a summary
(each name's signature and first docstring paragraph); the site renders the full entries.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "reference"
sys.path.insert(0, str(ROOT / "docs"))
import hooks  # noqa: E402

NOTE = (
    "<!-- Written by `make reference` from the code (scripts/reference_pages.py): do not edit. "
    "The site build writes it again. -->"
)
# MkDocs' attribute lists (`## name { #id }`): GitHub would show them as text.
ATTRIBUTE_LIST = re.compile(r"\s*\{ #[^}]+\}$", re.MULTILINE)


def api_summary() -> str:
    """Every public name, grouped by module: its signature and its docstring's first paragraph."""
    lines: list[str] = []
    current = None
    for module, name in hooks.public_names():
        if module != current:
            current = module
            lines += [f"## `{module}`", ""]
        value = getattr(importlib.import_module(module), name)
        lines += [f"### `{module}.{name}`", ""]
        if inspect.isclass(value) or inspect.isfunction(value):
            lines += ["```text", _signature(name, value), "```", ""]
        elif not inspect.ismodule(value):
            shown = repr(value)
            lines += ["```text", f"{name} = {shown[:300] + ' ...' if len(shown) > 300 else shown}", "```", ""]
        documented = inspect.isclass(value) or callable(value) or inspect.ismodule(value)
        doc = inspect.getdoc(value) if documented else ""
        first = (doc or "").split("\n\n", 1)[0].strip()
        if first:
            lines += [first, ""]
    return "\n".join(lines)


class _Shown:
    """A default value as the page shows it (sets sorted: their order varies between runs)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _stable(value: object) -> object:
    if value is inspect.Parameter.empty:
        return value
    if isinstance(value, (set, frozenset)):
        items = ", ".join(sorted(map(repr, value)))
        return _Shown(f"{type(value).__name__}({{{items}}})" if value else f"{type(value).__name__}()")
    return value


def _unquoted(annotation: object) -> object:
    """``'Cluster'`` (a postponed annotation) shown as ``Cluster``."""
    return _Shown(annotation) if isinstance(annotation, str) else annotation


def _signature(name: str, value: object) -> str:
    """``def name(a: int, *, b: str = 'x') -> bool``, one parameter a line when it is long."""
    kind = "class" if inspect.isclass(value) else "def"
    try:
        signature = inspect.signature(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"{kind} {name}(...)"
    parameters = [
        parameter.replace(default=_stable(parameter.default), annotation=_unquoted(parameter.annotation))
        for parameter in signature.parameters.values()
    ]
    signature = signature.replace(
        parameters=parameters, return_annotation=_unquoted(signature.return_annotation)
    )
    one_line = f"{kind} {name}{signature}"
    if len(one_line) <= 100 or not parameters:
        return one_line
    # The parameters one a line, with their separators (`*`, `/`) as str(signature) places them.
    inner = str(signature.replace(return_annotation=inspect.Signature.empty))[1:-1]
    returns = "" if signature.return_annotation is inspect.Signature.empty else (
        " -> " + inspect.formatannotation(signature.return_annotation)
    )
    parts = _split_top_level(inner)
    return f"{kind} {name}(\n" + "".join(f"    {part},\n" for part in parts) + f"){returns}"


def _split_top_level(text: str) -> list[str]:
    """``a: dict[str, int] = {}, b`` -> the two parameters (commas inside brackets or quotes stay)."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return [part for part in parts if part]


def help_note() -> str:
    """argparse's layout of ``--help`` changes between Python minors: the CLI page says which."""
    return f"<!-- --help as Python {python_minor()}'s argparse formats it -->"


def python_minor() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def recorded_python(page_text: str) -> str | None:
    """The Python minor a committed CLI reference was formatted with, if the page says."""
    found = re.search(r"<!-- --help as Python (\d+\.\d+)'s argparse formats it -->", page_text)
    return found.group(1) if found else None


def committed_text(name: str) -> str:
    """The Markdown committed for placeholder ``name``."""
    if name == "api":
        return api_summary()
    generator = hooks.GENERATORS.get(name)
    if generator is None:
        raise ValueError(f"unknown reference placeholder {name!r} (known: {', '.join(hooks.GENERATORS)})")
    text = ATTRIBUTE_LIST.sub("", generator())
    return f"{help_note()}\n\n{text}" if name == "cli" else text


def rewritten(page: str) -> str:
    """``page`` with each placeholder followed by its current committed text."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        return (
            f"<!-- ktest-reference: {name} -->\n{NOTE}\n\n{committed_text(name).rstrip()}\n\n"
            f"<!-- ktest-reference-end: {name} -->"
        )

    return hooks.PLACEHOLDER.sub(replace, page)


def stale_pages(*, other_python: bool = True) -> dict[Path, str]:
    """The reference pages whose committed text differs from the code's, with their new text.
    ``other_python=False`` leaves out a CLI page formatted by another Python minor's argparse."""
    found: dict[Path, str] = {}
    for path in sorted(PAGES.glob("*.md")):
        text = path.read_text()
        recorded = recorded_python(text)
        if not other_python and recorded is not None and recorded != python_minor():
            continue
        new = rewritten(text)
        if new != text:
            found[path] = new
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say which pages are out of date")
    args = parser.parse_args(argv)
    stale = stale_pages()
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run `make reference`")
        return 1 if stale else 0
    for path, text in stale.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
