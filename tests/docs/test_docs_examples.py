"""Every code block of README.md and docs/**/*.md runs, so the docs are tests.

Each page is a project (``docs_blocks`` says how a block becomes a file of it): its Python
runs in one child pytest session with ktest's plugin against a real control plane, as a user
would run it; its ini/toml/yaml/json blocks must parse; its shell blocks may only name
``ktest`` commands and options, pytest options, extras and make targets that exist.
A page's child session attaches to the docs session's warm control plane, as a user's project
attaches to ``ktest up``, unless the page needs one of its own (``warm_plane``). Such a page's
test returns once its child's tests passed; the child's last ~5 s (its namespaces' deletion)
overlap the next pages, and its exit status and output are checked before the warm plane stops.

Own extraction rather than sybil or pytest-examples: a page's blocks work together (an
operator module, its test file and the ini beside them, run by pytest with the plugin as a
user's project is), which those run block by block in the test process; finding fenced
blocks and the comment before each is a few lines (``docs_blocks``).
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from docs_blocks import ROOT, Block, blocks, pages
from docs_runner import CHILD_TIMEOUT, PYTHON, page_blocks, start_page
from warm_plane import own_plane_reasons, plane_asked

sys.path.insert(0, str(ROOT / "docs"))
import hooks

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

SHELL = ("sh", "bash", "shell", "console")


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# A page's child session may build a Go manager from empty caches: many minutes on 2 busy cores.
@pytest.mark.timeout(CHILD_TIMEOUT + 120)
@pytest.mark.parametrize("page", pages(), ids=_page_id)
def test_page_examples_run(
    page: Path, tmp_path: Path, pytestconfig: pytest.Config, request: pytest.FixtureRequest
) -> None:
    for block in blocks(page):
        if block.skip is not None:
            continue
        if block.language in PYTHON:
            compile(block.text, block.where, "exec")  # a syntax error names the page and line
        elif block.language in ("ini", "cfg"):
            _check_parses(block, lambda text: configparser.ConfigParser().read_string(text))
        elif block.language == "toml" and tomllib is not None:
            _check_parses(block, tomllib.loads)
        elif block.language in ("yaml", "yml"):
            _check_parses(block, lambda text: list(yaml.safe_load_all(text)))
        elif block.language == "json":
            _check_parses(block, json.loads)
        elif block.language in SHELL:
            problems = list(_shell_problems(block.text))
            assert not problems, f"{block.where}: " + "; ".join(problems)
    # A page that can share a control plane attaches to the session's warm one, as a user's
    # project attaches to `ktest up` (one with simulated nodes if its ini asks, plane_asked);
    # one that needs its own (own_plane_reasons) starts it.
    runs_python = any(block.language in PYTHON for block in page_blocks(page, None))
    shares = runs_python and not own_plane_reasons(page)
    warm = request.getfixturevalue("docs_warm_planes").get(plane_asked(page)) if shares else None
    run = start_page(page, tmp_path / "project", pytestconfig, backend=None, env=warm.env if warm else None)
    if run is None:
        return
    if warm is None:
        run.finish()
        return
    # Once its tests passed, the child only waits for its namespaces' deletion: the next pages
    # run meanwhile, and the warm plane finishes it (exit status, output) before it stops.
    progress = run.tests_passed()
    if progress is not None:
        warm.finishing.append(run)
        cluster, output = progress["cluster"], ""
    else:
        output = run.finish()
        found = re.search(r"^cluster: (.*)$", output, re.MULTILINE)
        cluster = found[1] if found else None
    if cluster is not None:  # the child used a cluster: this warm plane (its server), no other
        assert cluster.startswith(f"{warm.plane.attached_header}: {warm.description}"), (
            f"{_page_id(page)}: its child session did not attach to the docs session's warm control plane "
            f"({warm.description}) but used {cluster}: if the page needs one of its own, make "
            f"warm_plane.own_plane_reasons say why.\n{output[-3000:]}"
        )


def _check_parses(block: Block, parse: object) -> None:
    try:
        parse(block.text)  # type: ignore[operator]
    except Exception as error:
        pytest.fail(f"{block.where}: the {block.language} block does not parse: {error}", pytrace=False)


# ------------------------------------------------------------------------------- shell blocks


def _commands(text: str) -> Iterator[list[str]]:
    """The simple commands of a shell block (continuations joined, comments dropped)."""
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        command: list[str] = []
        for word in words:
            if word in ("&&", "||", ";", "|"):
                if command:
                    yield command
                command = []
            else:
                command.append(word)
        if command:
            yield command


def _shell_problems(text: str) -> Iterator[str]:
    for command in _commands(text):
        while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", command[0]):  # VAR=value cmd
            command = command[1:]
        if not command:
            continue
        program = Path(command[0]).name
        if program == "ktest":
            yield from _ktest_problems(command)
        elif program == "pytest" or command[:3] == ["python", "-m", "pytest"]:
            yield from _pytest_problems(command)
        elif program == "pip" and "install" in command:
            yield from _pip_problems(command)
        elif program == "make":
            yield from _make_problems(command)


def _ktest_problems(command: list[str]) -> Iterator[str]:
    parsers = dict(hooks.commands())
    name = "ktest"
    for word in command[1:]:
        if f"{name} {word}" in parsers:
            name = f"{name} {word}"
        elif not word.startswith("-"):
            break
    if len(command) > 1 and name == "ktest" and not command[1].startswith("-"):
        yield f"`ktest {command[1]}` is no ktest command"
        return
    known = {option for action in parsers[name]._actions for option in action.option_strings}
    for word in command[1:]:
        for option in re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", word):
            if option not in known:
                yield f"`{name}` has no option {option}"


def _pytest_options() -> set[str]:
    from ktest.config import SETTINGS

    known = {spec.option for spec in SETTINGS}
    known |= {f"--ktest-no-{spec.option.removeprefix('--ktest-')}" for spec in SETTINGS if spec.flag}
    return known


def _pytest_problems(command: list[str]) -> Iterator[str]:
    known = _pytest_options()
    for word in command:
        for option in re.findall(r"(?<![\w-])(--ktest-[a-z0-9-]+)", word):
            if option not in known:
                yield f"pytest has no option {option} (ktest's are: {', '.join(sorted(known))})"


def _pip_problems(command: list[str]) -> Iterator[str]:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]) \
        if tomllib else set()
    for word in command:
        match = re.match(r"^(?:ktest|\.|dist/ktest-[^\[]+\.whl)\[([a-z0-9,-]+)\]$", word)
        if match and extras:
            for extra in match[1].split(","):
                if extra not in extras:
                    yield f"ktest has no extra {extra!r} (it has: {', '.join(sorted(extras))})"


def _make_problems(command: list[str]) -> Iterator[str]:
    makefile = (ROOT / "Makefile").read_text()
    for word in command[1:]:
        if word.startswith("-") or "=" in word:
            continue
        if not re.search(rf"^{re.escape(word)}:", makefile, re.MULTILINE):
            yield f"the Makefile has no target {word!r}"


# ---------------------------------------------------------------------------- the directives


SKIPPED_CAP = 0
"""Blocks that run nowhere (``skip REASON``): none today; a new one must say why and raise this."""
BACKENDS_RUN_ELSEWHERE = {"kind": ROOT / "tests" / "on_kind" / "test_docs_kind_examples.py"}
"""A block's ``backend=NAME``, and the test module of ``make test``'s layer for NAME that runs it."""


FAILURE_EXAMPLES = ROOT / "tests" / "docs" / "test_docs_failure_messages.py"
"""Runs the blocks marked ``skip failure example "NAME": ...`` (tests that fail on purpose, their
messages shown on the page) and checks the page's messages against theirs."""


def test_skipped_blocks_say_why_and_stay_rare() -> None:
    every = [block for page in pages() for block in blocks(page)]
    failing_on_purpose = [block for block in every if (block.skip or "").startswith("failure example ")]
    assert not failing_on_purpose or FAILURE_EXAMPLES.exists()
    skipped = [block for block in every if block.skip is not None and block not in failing_on_purpose]
    assert not [block.where for block in skipped if block.skip == "(no reason)"], "skip needs a reason"
    assert len(skipped) <= SKIPPED_CAP, (
        f"{len(skipped)} blocks do not run (at most {SKIPPED_CAP}):\n"
        + "\n".join(f"{b.where}: {b.skip}" for b in skipped)
    )


def test_blocks_for_another_backend_run_in_its_layer() -> None:
    """The bare run leaves ``backend=kind`` blocks out; each must be one the kind layer runs."""
    elsewhere = [block for page in pages() for block in blocks(page) if block.backend is not None]
    unknown = [f"{b.where}: backend={b.backend}" for b in elsewhere
               if b.backend not in BACKENDS_RUN_ELSEWHERE]
    known = sorted(BACKENDS_RUN_ELSEWHERE)
    assert not unknown, f"no layer of make test runs these: {unknown} (known: {known})"
    for backend, module in BACKENDS_RUN_ELSEWHERE.items():
        assert module.is_file(), f"{module} runs the backend={backend} blocks; it is gone"
    pages_with_kind = {b.page for b in elsewhere if b.backend == "kind"}
    assert {ROOT / "docs" / "kind.md", ROOT / "docs" / "tutorials" / "kind-images.md"} <= pages_with_kind


def test_a_docs_test_directive_with_an_unknown_word_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docs_blocks

    monkeypatch.setattr(docs_blocks, "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: fiel=x.py -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match=r"page.md:2: unknown docs-test word 'fiel=x.py'"):
        blocks(page)
    page.write_text("<!-- docs-test: link=m:no/such/dir -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match=r"page.md:2: link=m:no/such/dir: no repository path"):
        blocks(page)
    page.write_text("<!-- docs-test: file=t.py backend=kind link=m:page.md -->\n```python\npass\n```\n")
    (block,) = blocks(page)
    assert (block.file, block.backend, block.links, block.skip) == ("t.py", "kind", (("m", "page.md"),), None)
    page.write_text("<!-- docs-test: file=t.py copy=.:page.md -->\n```python\npass\n```\n")
    (block,) = blocks(page)
    assert block.copies == ((".", "page.md"),)
    page.write_text("<!-- docs-test: copy=.:no/such/dir -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match=r"page.md:2: copy=.:no/such/dir: no repository path"):
        blocks(page)


def test_the_shell_check_finds_wrong_commands() -> None:
    """The shell check is no rubber stamp: each kind of mistake it exists for is reported."""
    wrong = textwrap.dedent("""\
        ktest binaries install --k8s-versoin 1.37
        ktest frobnicate
        pytest --ktest-bakend kind
        pip install "ktest[kopff]"
        make tets
        """)
    problems = list(_shell_problems(wrong))
    assert len(problems) == 5, problems
    right = 'ktest binaries install --k8s-version 1.37\npytest --ktest-backend kind\nmake test\n'
    assert not list(_shell_problems(right))


def test_pages_that_need_a_control_plane_of_their_own_are_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page shares the warm plane unless what its project runs shapes the plane, needs the
    embedded one, or installs a CRD an earlier page defines otherwise; shell lines do not count."""
    import docs_blocks
    import warm_plane

    monkeypatch.setattr(docs_blocks, "ROOT", tmp_path)
    monkeypatch.setattr(warm_plane, "ROOT", tmp_path)
    monkeypatch.setattr(warm_plane, "pages", lambda: [])
    warm_plane._first_definitions.cache_clear()
    try:
        _check_own_plane_reasons(tmp_path, monkeypatch)
    finally:
        warm_plane._first_definitions.cache_clear()  # the real pages' definitions for the next test


def _check_own_plane_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import warm_plane
    from warm_plane import PlaneAsked, plane_asked

    page = tmp_path / "page.md"
    test = "```python\ndef test_x(cluster, namespace):\n    pass\n```\n"
    page.write_text(test + "```sh\npytest --ktest-apiserver-flags=--v=2\n```\n")
    assert own_plane_reasons(page) == []
    ini = "<!-- docs-test: file=pytest.ini -->\n```ini\n[pytest]\nktest_feature_gates = A=true\n```\n"
    page.write_text(test + ini)
    assert own_plane_reasons(page) == ["sets ktest_feature_gates"]
    page.write_text("```python\nimport os\nos.environ['KTEST_CONTROLLERS'] = 'none'\n```\n")
    assert own_plane_reasons(page) == ["sets KTEST_CONTROLLERS"]
    page.write_text("```python\ndef test_x(control_plane):\n    pass\n```\n")
    assert own_plane_reasons(page) == ["uses control_plane"]
    # what a warm plane matches, as `ktest up --nodes 3` would: simulated nodes, the default
    # controllers however the ini spells them; other controllers, or nodes set otherwise, do not
    nodes = "<!-- docs-test: file=pytest.ini -->\n```ini\n[pytest]\nktest_nodes = 3\n%s```\n"
    page.write_text(test + nodes % "")
    assert (own_plane_reasons(page), plane_asked(page)) == ([], PlaneAsked(nodes=3))
    page.write_text(test + nodes % "ktest_controllers = namespace-controller, garbagecollector\n")
    assert (own_plane_reasons(page), plane_asked(page)) == ([], PlaneAsked(nodes=3))
    page.write_text(test + nodes % "ktest_controllers = garbagecollector,namespace,job\n")
    assert own_plane_reasons(page) == ["sets ktest_controllers"]
    page.write_text("```python\nimport os\nos.environ['KTEST_NODES'] = '3'\n```\n")
    assert own_plane_reasons(page) == ["sets KTEST_NODES"]

    crd = ("<!-- docs-test: file=crd.yaml -->\n```yaml\napiVersion: apiextensions.k8s.io/v1\n"
           "kind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec: {scope: %s}\n```\n")
    first, same, other = (tmp_path / f"{name}.md" for name in ("a", "b", "c"))
    first.write_text(test + crd % "Namespaced")
    same.write_text(test + crd % "Namespaced")
    other.write_text(test + crd % "Cluster")
    monkeypatch.setattr(warm_plane, "pages", lambda: [first, same, other])
    warm_plane._first_definitions.cache_clear()
    assert [own_plane_reasons(page) for page in (first, same)] == [[], []]
    assert own_plane_reasons(other) == ["defines CRD widgets.example.com unlike a.md"]


def test_a_snippet_gets_the_fixtures_it_uses_and_no_other() -> None:
    """A snippet that starts its own ControlPlane asks for no ``cluster``: its child session then
    starts no session plane beside it (or attaches to none)."""
    import docs_runner

    def wrapped(text: str) -> str:
        block = Block(ROOT / "README.md", 1, "python", text)
        return docs_runner._as_test(block).text.splitlines()[1]

    assert wrapped("with ControlPlane() as cp:\n    cp.restart()\n") == "def test_snippet():"
    assert wrapped("cluster.create(obj, namespace=namespace)\n") == "def test_snippet(cluster, namespace):"
    assert wrapped("check = lambda: cluster.exists(obj)\n") == "def test_snippet(cluster):"
    assert wrapped("cluster = Cluster(cp.kubeconfig)\ncluster.close()\n") == "def test_snippet():"


FAILS_AFTER_ITS_TESTS = '''\
<!-- docs-test: file=conftest.py -->
```python
import pytest

@pytest.fixture(scope="session", autouse=True)
def breaks_at_the_end():
    yield
    raise RuntimeError("the session broke after its tests")
```

```python
def test_passes(cluster, namespace):
    assert cluster.exists(("v1", "Namespace", namespace))
```
'''


def test_a_child_that_fails_after_its_tests_passed_fails_when_the_warm_plane_finishes_it(
    tmp_path: Path, pytestconfig: pytest.Config, docs_warm_plane: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's test returns once its child's tests passed (the child then only waits for its
    namespaces' deletion): what goes wrong after that still fails, naming the page."""
    import docs_blocks
    import docs_runner
    from warm_plane import DocsWarmPlane, finish_children

    monkeypatch.setattr(docs_blocks, "ROOT", tmp_path)
    monkeypatch.setattr(docs_runner, "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(FAILS_AFTER_ITS_TESTS)
    run = start_page(page, tmp_path / "project", pytestconfig, backend=None, env=docs_warm_plane.env)
    assert run is not None
    progress = run.tests_passed()
    assert progress is not None, (tmp_path / "child-output" / "stdout").read_text()
    assert progress["outcomes"] == {"passed": 1}
    assert progress["cluster"].startswith(docs_warm_plane.plane.attached_header)
    warm = DocsWarmPlane(docs_warm_plane.plane, [run])
    with pytest.raises(AssertionError) as caught:
        finish_children(warm)
    message = str(caught.value)
    assert "after their tests passed" in message and "the examples of page.md failed" in message, message
    assert "the session broke after its tests" in message, message
    assert warm.finishing == []
