"""MkDocs hooks: the reference pages are written from ktest's own code at build time.

A reference page holds a placeholder comment, ``<!-- ktest-reference: NAME -->``; the hook
replaces it with what the code declares, so the pages cannot drift from it. After the placeholder
the page carries the same reference as plain Markdown, up to ``<!-- ktest-reference-end: NAME -->``,
so the page reads usefully on GitHub too: ``make reference`` (scripts/reference_pages.py) writes
it, and a test fails when it is out of date. The site build replaces both:

* ``api``: every public name of ``ktest/public_api.py`` (``PUBLIC``), rendered by mkdocstrings
  from its docstring and signature at the module that defines it;
* ``settings``: ``ktest.config.SETTINGS`` (option, ini key, environment variable, default);
* ``markers``: the markers the pytest plugin registers (``ktest.plugin.plugin.MARKERS``);
* ``fixtures``: every fixture the plugin offers, read from a real pytest session's fixture
  manager (so the kind backend's and the webhook fixtures are there too);
* ``cli``: every ``ktest`` command and subcommand with its ``--help``, from the argparse parsers;
* ``assertions``: the ready assertions of ``public_api.ASSERTIONS``, a line each;
* ``versions``: the supported Kubernetes minors of ``ktest.assets.minors.MINORS`` and their facts.

``tests/docs/test_docs_reference.py`` builds the site and checks each name has its entry.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

# A placeholder, and the text `make reference` committed after it for readers on GitHub (up to
# its end marker): the site build replaces both with what the code says now.
PLACEHOLDER = re.compile(
    r"<!-- ktest-reference: ([a-z-]+) -->(?:.*?<!-- ktest-reference-end: \1 -->)?", re.DOTALL
)


def anchor(name: str) -> str:
    """The HTML id of a reference entry (``ktest.operators.run_kopf`` -> ``ktest-operators-run_kopf``)."""
    # Dunders go: Markdown would read ``__version__`` inside an attribute list as emphasis.
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name.replace("__", "")).strip("-")


# ------------------------------------------------------------------------------------------ API


def public_names() -> list[tuple[str, str]]:
    """(module, name) for every public name, in ``public_api.PUBLIC``'s order."""
    from ktest import public_api

    return [(module, name) for module, names in public_api.PUBLIC.items() for name in names]


def _defined_at(module: str, name: str) -> tuple[str, Any]:
    """Where mkdocstrings finds ``module.name``: the dotted path of its definition, and the object."""
    value = getattr(importlib.import_module(module), name)
    if inspect.ismodule(value):
        return value.__name__, value
    if (inspect.isclass(value) or inspect.isfunction(value)) and getattr(value, "__module__", None):
        return f"{value.__module__}.{value.__qualname__}", value
    return "", value


def _inherits_from_ktest(value: object) -> bool:
    """A class whose public methods come partly from a base class of ktest's own (not an error)."""
    bases = inspect.getmro(value)[1:] if inspect.isclass(value) else ()
    return any(base.__module__.startswith("ktest.operators.") for base in bases)


def api_markdown() -> str:
    lines: list[str] = []
    current = None
    for module, name in public_names():
        if module != current:
            current = module
            lines += [f"## `{module}`", ""]
        public = f"{module}.{name}"
        path, value = _defined_at(module, name)
        lines += [f'### `{public}` {{ #{anchor(public)} }}', ""]
        if path and path != public:
            lines += [f"Defined in `{path.rsplit('.', 1)[0] if not inspect.ismodule(value) else path}`.", ""]
        if inspect.ismodule(value):
            lines += [f"::: {path}", "    options:", "      show_root_heading: false",
                      "      show_submodules: false", "      members: false", ""]
        elif path:
            lines += [f"::: {path}", "    options:", "      show_root_heading: false"]
            if _inherits_from_ktest(value):
                lines += ["      inherited_members: true"]  # e.g. OperatorHandle: its health part is its base
            lines += [""]
        else:
            shown = repr(value)
            if len(shown) > 300:
                shown = shown[:300] + " ..."
            lines += ["```text", f"{name} = {shown}", "```", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- settings


def settings_markdown() -> str:
    from ktest.config import SETTINGS

    lines = [
        "| setting | option | ini key | environment | default | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for spec in SETTINGS:
        option = f"`{spec.option}`"
        if spec.flag:
            option += f" / `--ktest-no-{spec.option.removeprefix('--ktest-')}`"
        if spec.multiple:
            option += " (repeatable)"
        ini = f"`{spec.ini}`" + (" (lines)" if spec.multiple else "")
        lines.append(
            f'| <span id="{anchor("setting-" + spec.name)}"></span>`{spec.name}` | {option} | {ini} | '
            f"`{spec.env}` | {_cell(spec.default_text)} | {_cell(spec.help)} |"
        )
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# -------------------------------------------------------------------------------------- markers


def markers() -> list[tuple[str, str]]:
    """(name with its arguments, description) of every marker the plugin registers."""
    from ktest.plugin.plugin import MARKERS

    return [tuple(marker.split(": ", 1)) for marker in MARKERS]  # type: ignore[misc]


def markers_markdown() -> str:
    lines: list[str] = []
    for signature, description in markers():
        name = signature.split("(", 1)[0]
        lines += [f"## `@pytest.mark.{signature}` {{ #{anchor('marker-' + name)} }}", "", description, ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- fixtures

class FixtureCollector:
    """A pytest plugin: once a session has collected, :attr:`found` holds every fixture ktest
    defines in it (name -> scope, module, docstring)."""

    def __init__(self) -> None:
        self.found: dict[str, dict[str, str]] = {}

    def pytest_collection_finish(self, session: Any) -> None:
        manager = session._fixturemanager
        if hasattr(manager, "_get_all_fixture_defs_for_node"):  # pytest >= 9.1
            definitions = list(manager._get_all_fixture_defs_for_node(session))
        else:
            definitions = [d for defs in manager._arg2fixturedefs.values() for d in defs]
        for definition in definitions:
            name, function = definition.argname, definition.func
            module = getattr(function, "__module__", "") or ""
            if module.split(".")[0] == "ktest" and not name.startswith("_"):
                scope = definition.scope if isinstance(definition.scope, str) else definition.scope.value
                self.found[name] = {"scope": scope, "module": module, "doc": function.__doc__ or ""}


BACKENDS_WITH_FIXTURES = ("bare", "kind")
"""The backends whose sessions :func:`fixtures` lists (some add fixtures only when chosen)."""

_COLLECT = r"""
import json, sys, pytest

# One session per backend, in this one interpreter: each pytest.main builds a config of its own.
docs, scratch, *backends = sys.argv[1:]
sys.path.insert(0, docs)
from hooks import FixtureCollector

for backend in backends:
    collector = FixtureCollector()
    pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", scratch, "--ktest-backend", backend],
                plugins=[collector])
    print("KTEST-FIXTURES " + json.dumps(collector.found))
"""


@cache
def fixtures() -> dict[str, dict[str, str]]:
    """Every fixture ktest's plugin defines: name -> scope, module, docstring (from a real
    pytest session per backend, in one child process: some backends add fixtures only when chosen)."""
    found: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="ktest-docs-") as scratch:
        Path(scratch, "pytest.ini").write_text("[pytest]\n")
        backends = BACKENDS_WITH_FIXTURES
        docs = str(Path(__file__).resolve().parent)
        result = subprocess.run(
            [sys.executable, "-c", _COLLECT, docs, scratch, *backends],
            capture_output=True, text=True, cwd=scratch, timeout=120, check=False,
        )
        lines = [line for line in result.stdout.splitlines() if line.startswith("KTEST-FIXTURES ")]
        if len(lines) != len(backends):
            raise RuntimeError(f"could not list ktest's fixtures:\n{result.stdout}\n{result.stderr}")
        for line in lines:
            found.update(json.loads(line.split(" ", 1)[1]))
    return dict(sorted(found.items()))


def fixtures_markdown() -> str:
    lines: list[str] = []
    for name, details in fixtures().items():
        doc = inspect.cleandoc(details["doc"]) or "(no description)"
        lines += [
            f"## `{name}` {{ #{anchor('fixture-' + name)} }}",
            "",
            f"Scope: `{details['scope']}`. Defined in `{details['module']}`.",
            "",
            doc,
            "",
        ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ CLI


def commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every ``ktest`` command and subcommand (``"ktest binaries install"``), with its parser."""
    from ktest.cli.main import build_parser

    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        found.append((prefix, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(f"{prefix} {name}", child)

    walk("ktest", build_parser())
    return found


HELP_COLUMNS = "100"
"""The width ``--help`` is formatted for on the page, whatever the terminal (argparse reads COLUMNS)."""


def cli_markdown() -> str:
    lines: list[str] = []
    for command, parser in commands():
        parser.prog = command
        text = _help_text(parser)
        level = "#" * min(2 + command.count(" ") - 1, 4) if command != "ktest" else "##"
        heading = f"{level} `{command}` {{ #{anchor('cli-' + command)} }}"
        lines += [heading, "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


def _help_text(parser: argparse.ArgumentParser) -> str:
    import os

    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        return parser.format_help()
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


# ------------------------------------------------------------------------------------ assertions


def assertions_markdown() -> str:
    """A table of every ready assertion: its first docstring line, a link to its API entry."""
    import ktest.assertions
    from ktest import public_api

    lines = ["| assertion | module | checks |", "| --- | --- | --- |"]
    for name, (module, _async) in public_api.ASSERTIONS.items():
        doc = inspect.getdoc(getattr(ktest.assertions, name)) or ""
        first = _cell(" ".join(doc.split("\n\n", 1)[0].split()))
        link = f"api.md#{anchor('ktest.assertions.' + name)}"
        lines.append(f"| [`{name}`]({link}) | `{public_api.assertion_module(module)}` | {first} |")
    return "\n".join(lines)


def versions_markdown() -> str:
    """A table of every supported Kubernetes minor: ``ktest.assets.minors.MINORS``."""
    from ktest.assets import minors

    roles = {minors.DEFAULT_MINOR: "default", minors.OLDER_MINOR: "older (CI)"}
    lines = [
        "| minor | role | etcd (its kubeadm's) | CoreDNS | pause | Go a build needs | checked against |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for minor in minors.supported_minors():
        facts = minors.MINORS[minor]
        lines.append(
            f"| {minor} | {roles.get(minor, '')} | {facts.etcd} | {facts.coredns} | {facts.pause} "
            f"| {facts.go} | {facts.checked_patch} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- hooks

GENERATORS = {
    "api": api_markdown,
    "settings": settings_markdown,
    "markers": markers_markdown,
    "fixtures": fixtures_markdown,
    "cli": cli_markdown,
    "assertions": assertions_markdown,
    "versions": versions_markdown,
}


def render(markdown: str) -> str:
    """``markdown`` with every reference placeholder replaced by its generated text."""
    def replace(match: re.Match[str]) -> str:
        generator = GENERATORS.get(match.group(1))
        if generator is None:
            known = ", ".join(GENERATORS)
            raise ValueError(f"unknown reference placeholder {match.group(0)!r} (known: {known})")
        return generator()

    return PLACEHOLDER.sub(replace, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown)
