"""``ktest init github-actions``: write a ready GitHub Actions workflow into the user's repository.

When ktest's repository and commit are known (``--repository``/``--ref``, or ktest installed from
GitHub or a checkout whose ``origin`` is there), a dozen lines calling ktest's reusable workflow,
pinned by commit SHA; otherwise a self-contained matrix job installing the same release from PyPI
(:func:`render_standalone_workflow`), which uploads the failed tests' timelines as the reusable
workflow does. Each backend adds its own steps to its cells (the ``ci_steps`` part of its spec).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ktest import backend_registry as registry
from ktest.assets.minors import supported_minors
from ktest.assets.selectors import KubeVersion, parse_selector
from ktest.errors import KtestError

DEFAULT_PATH = Path(".github/workflows/ktest.yml")
REUSABLE_WORKFLOW = ".github/workflows/ktest.yml"
_SHA = re.compile(r"^[0-9a-f]{40}$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_VERSION_ITEM = re.compile(r"^(v?1\.\d+(\.\d+)?|default|latest|supported)$")
# GitHub's own actions the self-contained workflow uses, pinned by commit (the tag in the comment).
CHECKOUT = "actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8 # v5.0.0"
SETUP_PYTHON = "actions/setup-python@e797f83bcb11b83ae66e0230d6156d7c80228e7c # v6.0.0"
CACHE = "actions/cache@0057852bfaa89a56745cba8c7296529d2fc39830 # v4.3.0"
UPLOAD_ARTIFACT = "actions/upload-artifact@330a01c490aca151604b8cf639adc76d48f6c5d4 # v5.0.0"
# Cancel a superseded run, except on the default branch: every commit there gets its full run.
CANCEL_UNLESS_DEFAULT_BRANCH = (
    "${{ github.ref != format('refs/heads/{0}', github.event.repository.default_branch) }}"
)

# A pull request from a branch of this repository already runs on its push: run pull requests
# from forks only, so one change does not run the whole matrix twice.
ONCE_PER_CHANGE = (
    "github.event_name == 'push' || github.event.pull_request.head.repo.full_name != github.repository"
)
DEFAULT_PYTHON = "3.11"
_PYTHON_VERSION = re.compile(r"^3\.\d{1,2}$")

_WORKFLOW_HEAD = (
    "name: ktest",
    "on:",
    "  push:",
    "  pull_request:",
    "permissions:",
    "  contents: read",
    "concurrency:",
    "  group: ktest-${{ github.ref }}",
    f"  cancel-in-progress: {CANCEL_UNLESS_DEFAULT_BRANCH}",
    "jobs:",
    "  ktest:",
    "    # On push, and on pull requests from forks (a branch of this repository ran on its push).",
    f"    if: {ONCE_PER_CHANGE}",
)
"""What every workflow ``ktest init github-actions`` writes starts with (after its comments)."""


class InitError(KtestError):
    """``ktest init`` could not write the workflow (the message says how to fix it)."""


def register(subparsers: Any) -> None:
    """Add ``init`` and its targets to the ``ktest`` parser."""
    parser = subparsers.add_parser(
        "init", help="write CI configuration into your repository (github-actions)"
    )
    targets = parser.add_subparsers(title="targets", metavar="TARGET")
    parser.set_defaults(help_parser=parser)  # without a subcommand: its help
    github = targets.add_parser(
        "github-actions",
        help="a workflow running your pytest suite across Kubernetes versions x backends",
        description=(
            "Write a GitHub Actions workflow calling ktest's reusable workflow, pinned by commit SHA. "
            "The ktest repository and commit default to where this ktest was installed from "
            "(pip install git+https://github.com/OWNER/ktest@SHA, or a git checkout whose 'origin' "
            "is on GitHub). When neither is known and neither option is given (ktest installed from "
            "PyPI, or a checkout without a GitHub 'origin'), it writes a self-contained workflow "
            "instead: it installs this ktest release from PyPI (the kind extra only in kind cells), "
            "caches the Kubernetes binaries by exact version and the kind node image, and runs "
            "pytest. Both run on push and on pull requests from forks."
        ),
    )
    github.add_argument("--path", type=Path, default=DEFAULT_PATH, help=f"default: {DEFAULT_PATH}")
    github.add_argument("--force", action="store_true", help="overwrite an existing file")
    github.add_argument("--repository", default=None, metavar="OWNER/NAME", help="ktest's GitHub repository")
    github.add_argument("--ref", default=None, metavar="SHA", help="the ktest commit to pin (40 hex digits)")
    github.add_argument(
        "--k8s-versions",
        default=None,
        metavar="LIST",
        help="comma-separated supported versions: 1.37, 1.37.2, default, supported "
        f"(supported minors: {', '.join(supported_minors())}; default: the two newest)",
    )
    github.add_argument(
        "--backends", default="bare", metavar="LIST",
        help=f"comma-separated, of {', '.join(registry.names('creates_cluster'))} (default: bare)",
    )
    github.add_argument("--shards", type=int, default=1, help="jobs per version x backend (pytest-split)")
    github.add_argument(
        "--install",
        default="pip install -e .",
        help="command installing your project and its test dependencies",
    )
    github.add_argument("--pytest-args", default="", help="extra pytest arguments (e.g. tests/integration)")
    github.add_argument(
        "--python-version", default=DEFAULT_PYTHON, metavar="3.X",
        help=f"the Python of the test jobs (default: {DEFAULT_PYTHON})",
    )
    github.set_defaults(handler=_github_actions)


@dataclass(frozen=True)
class WorkflowOptions:
    repository: str
    ref: str
    k8s_versions: tuple[str, ...]
    backends: tuple[str, ...]
    shards: int = 1
    install: str = "pip install -e ."
    pytest_args: str = ""
    ktest_version: str = ""
    python_version: str = DEFAULT_PYTHON


def render_workflow(options: WorkflowOptions) -> str:
    """The workflow file's text (validated options; see :func:`check_options`)."""
    check_options(options)
    tag = f"  # ktest {options.ktest_version}" if options.ktest_version else ""
    lines = [
        "# Kubernetes integration tests with ktest: every Kubernetes version x backend below runs",
        "# this repository's pytest suite in its own job (binaries and kind node images cached).",
        "# Written by `ktest init github-actions`; see the CI section of ktest's documentation.",
        *_WORKFLOW_HEAD,
        f"    uses: {options.repository}/{REUSABLE_WORKFLOW}@{options.ref}{tag}",
        "    with:",
        f"      k8s-versions: {_yaml_string(json.dumps(list(options.k8s_versions)))}",
        f"      backends: {_yaml_string(json.dumps(list(options.backends)))}",
    ]
    if options.shards != 1:
        lines.append(f"      shards: {options.shards}")
    if options.install != "pip install -e .":
        lines.append(f"      install: {_yaml_string(options.install)}")
    if options.pytest_args:
        lines.append(f"      pytest-args: {_yaml_string(options.pytest_args)}")
    if options.python_version != DEFAULT_PYTHON:
        lines.append(f"      python-version: {_yaml_string(options.python_version)}")
    return "\n".join(lines) + "\n"


def render_standalone_workflow(options: WorkflowOptions) -> str:
    """A workflow needing no ktest repository: installs ktest ``options.ktest_version`` from PyPI.

    Each cell resolves its version selector to the exact release (``ktest versions --resolve``),
    restores the binaries cached for that release (falling back to the same release cached by
    another ktest; ``ktest binaries install`` checks and repairs what it finds), and in kind cells
    installs the ``kind`` extra and restores the node image ``kindest/node:v<release>``.
    """
    _check_matrix(options)
    if options.shards != 1:
        raise InitError(
            "--shards needs ktest's reusable workflow, and this ktest does not know its repository and "
            "commit (installed from PyPI, or a checkout without a GitHub 'origin'); pass --repository "
            "OWNER/ktest --ref <commit SHA>, or drop --shards"
        )
    versions: list[str] = []
    for version in options.k8s_versions:
        if version == "supported":
            versions.extend(supported_minors())
        else:
            versions.append("latest" if version == "default" else str(parse_selector(version)))
    plain = f"ktest=={options.ktest_version}"
    pytest_command = f"python -m pytest {options.pytest_args}".rstrip()
    platform = "${{ runner.os }}-${{ runner.arch }}"
    release = "${{ steps.k8s.outputs.version }}"
    context = registry.CiContext(platform, release, cache_action=CACHE, upload_action=UPLOAD_ARTIFACT)
    cells = _backend_ci_steps(options.backends, context)
    extras = [
        (name, f"ktest[{found.extra}]=={options.ktest_version}") for name, found in cells if found.extra
    ]
    binaries_key = f"ktest-binaries-{platform}-k8s{release}-${{{{ matrix.backend }}}}"
    lines = [
        "# Kubernetes integration tests with ktest: every Kubernetes version x backend below runs",
        "# this repository's pytest suite in its own job (binaries and kind node images cached).",
        f"# Written by `ktest init github-actions` (ktest {options.ktest_version} from PyPI); see the CI",
        "# section of ktest's documentation.",
        *_WORKFLOW_HEAD,
        "    name: ${{ matrix.backend }} ${{ matrix.k8s-version }}",
        "    runs-on: ubuntu-latest",
        "    timeout-minutes: 60",
        "    strategy:",
        "      fail-fast: false",
        "      matrix:",
        f"        k8s-version: {json.dumps(list(dict.fromkeys(versions)))}",
        f"        backend: {json.dumps(list(options.backends))}",
        "    env:  # read by ktest's pytest plugin (environment beats the ini file)",
        "      KTEST_BACKEND: ${{ matrix.backend }}",
        "    steps:",
        f"      - uses: {CHECKOUT}",
        "        with:",
        "          persist-credentials: false",
        f"      - uses: {SETUP_PYTHON}",
        "        with:",
        f"          python-version: {_yaml_string(options.python_version)}",
        "      - name: Install ktest (the kind extra in kind cells) and the project under test",
        "        run: |",
    ]
    for number, (name, requirement) in enumerate(extras):
        lines += [
            f'          {"elif" if number else "if"} [ "$KTEST_BACKEND" = {name} ]; then',
            f"            python -m pip install {shlex.quote(requirement)}",
        ]
    if extras:
        lines += ["          else", f"            python -m pip install {shlex.quote(plain)}", "          fi"]
    else:
        lines.append(f"          python -m pip install {shlex.quote(plain)}")
    lines += [
        *(f"          {line}" for line in options.install.splitlines() if line.strip()),
        "      - name: Resolve the Kubernetes version to its exact release",
        "        id: k8s",
        "        env:",
        "          SELECTOR: ${{ matrix.k8s-version }}",
        "          PICK: 'import json, sys; print(json.load(sys.stdin)[\"resolved\"][sys.argv[1]] or \"\")'",
        "        run: |",
        '          ktest versions --json --resolve --k8s-version "$SELECTOR" > "$RUNNER_TEMP/versions.json"',
        '          version="$(python -c "$PICK" "$SELECTOR" < "$RUNNER_TEMP/versions.json")"',
        '          if [ -z "$version" ]; then',
        '            echo "::error::no Kubernetes release matches $SELECTOR (version listings unreachable?)"',
        "            exit 1",
        "          fi",
        '          echo "version=$version" >> "$GITHUB_OUTPUT"',
        '          echo "KTEST_K8S_VERSION=$version" >> "$GITHUB_ENV"',
        f"      - uses: {CACHE}",
        "        with:",
        "          path: |",
        "            ~/.cache/ktest/k8s",
        "            ~/.cache/ktest/kind/bin",
        f"          key: {binaries_key}-ktest{options.ktest_version}",
        "          restore-keys: |",
        f"            {binaries_key}-",
        "      - name: Kubernetes binaries (KUBEBUILDER_ASSETS for later steps)",
        "        run: |",
        '          ktest binaries install --k8s-version "$KTEST_K8S_VERSION"',
        '          assets="$(ktest binaries path --k8s-version "$KTEST_K8S_VERSION" --quiet)"',
        '          echo "KUBEBUILDER_ASSETS=$assets" >> "$GITHUB_ENV"',
    ]
    for _name, steps in cells:
        lines += steps.before_tests
    lines += [
        "      - name: pytest",
        f"        run: {_yaml_string(pytest_command)}",
        *_TIMELINE_STEPS,
    ]
    for _name, steps in cells:
        lines += steps.after_failure
    return "\n".join(lines) + "\n"


# A failing test's timeline (setting ktest_timeline, on failure by default): one self-contained
# HTML page per test under .ktest-artifacts/timelines, uploaded and named in the job summary.
_TIMELINE_ARTIFACT = "timelines-${{ matrix.backend }}-${{ matrix.k8s-version }}"
_TIMELINE_STEPS = (
    "      - name: Upload the timelines of failed tests",
    "        id: timelines",
    "        if: failure()",
    f"        uses: {UPLOAD_ARTIFACT}",
    "        with:",
    f"          name: {_TIMELINE_ARTIFACT}",
    "          path: .ktest-artifacts/timelines/",
    "          if-no-files-found: ignore",
    "      - name: Name the timelines in the job summary",
    "        if: failure()",
    "        env:",
    f"          ARTIFACT: {_TIMELINE_ARTIFACT}",
    "          ARTIFACT_URL: ${{ steps.timelines.outputs.artifact-url }}",
    "        run: |",
    *(
        f"          {line}"
        for line in (
            "pages=\"$(find .ktest-artifacts/timelines -name '*.html' -printf '- `%P`\\n' 2>/dev/null "
            '| sort)"',
            'if [ -n "$pages" ]; then',
            "  {",
            '    echo "### Failure timelines"',
            "    echo",
            '    echo "One HTML page per failed test in the artifact [$ARTIFACT]($ARTIFACT_URL): open it in '
            'any browser (it needs no network)."',
            "    echo",
            '    echo "$pages"',
            '  } >> "$GITHUB_STEP_SUMMARY"',
            "fi",
        )
    ),
)


def _backend_ci_steps(
    backends: Sequence[str], context: registry.CiContext
) -> list[tuple[str, registry.CiSteps]]:
    """Each matrix backend's own steps (the ``ci_steps`` part of its spec), in the matrix's order."""
    found = []
    for name in backends:
        part = registry.spec(name).load("ci_steps")
        if part is not None:
            found.append((name, part(context)))
    return found


def check_options(options: WorkflowOptions) -> None:
    """InitError naming the bad option and the accepted forms."""
    if not _REPOSITORY.match(options.repository):
        raise InitError(f"--repository {options.repository!r} is not OWNER/NAME (e.g. my-org/ktest)")
    if not _SHA.match(options.ref):
        raise InitError(
            f"--ref {options.ref!r} is not a commit SHA (40 lowercase hex digits). Workflows pin "
            "third-party code by commit, never by a movable tag or branch; "
            "`git ls-remote https://github.com/OWNER/ktest v0.1.0` shows a tag's commit."
        )
    _check_matrix(options)


def _check_matrix(options: WorkflowOptions) -> None:
    if not options.k8s_versions:
        raise InitError("--k8s-versions is empty; give e.g. 1.37,1.36")
    supported = supported_minors()
    for version in options.k8s_versions:
        if not _VERSION_ITEM.match(version):
            raise InitError(
                f"--k8s-versions: {version!r} is not a Kubernetes version; use 1.37, 1.37.2, "
                "default or supported"
            )
        named = version in ("default", "latest", "supported")
        if not named and KubeVersion.parse(version).minor_text not in supported:
            raise InitError(
                f"--k8s-versions: Kubernetes {version} is not supported by this ktest: the supported "
                f"minors are {', '.join(supported)} (`ktest versions` lists them); give one of those (e.g. "
                f"{supported[0]}), an exact release of one, default or supported"
            )
    if not _PYTHON_VERSION.match(options.python_version):
        raise InitError(f"--python-version {options.python_version!r} is not a Python version like 3.12")
    matrix = registry.names("creates_cluster")
    for backend in options.backends:
        if backend not in matrix:
            raise InitError(f"--backends: {backend!r} is not one of {', '.join(matrix)}")
    if not options.backends:
        raise InitError(f"--backends is empty; give one or more of {', '.join(matrix)}, comma-separated")
    if not 1 <= options.shards <= 32:
        raise InitError(f"--shards must be between 1 and 32, got {options.shards}")


def write_workflow(path: Path, text: str, *, force: bool) -> None:
    """Write ``text`` to ``path``; an existing file is an InitError unless ``force``."""
    if path.exists() and not force:
        raise InitError(
            f"{path} already exists; not overwriting it. Compare it with `ktest init github-actions "
            f"--path /tmp/ktest.yml`, or pass --force to replace it."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


def installed_origin() -> tuple[str | None, str | None]:
    """(owner/name, commit) of the ktest installed, from pip's direct_url.json or its git checkout."""
    try:
        origin = json.loads(metadata.distribution("ktest").read_text("direct_url.json") or "")
    except (metadata.PackageNotFoundError, ValueError):  # not installed, no such file, not JSON
        return None, None
    url = str(origin.get("url", ""))
    commit = (origin.get("vcs_info") or {}).get("commit_id")
    if commit:
        return _github_repository(url), str(commit)
    if url.startswith("file://"):
        return _git_checkout_origin(Path(urlparse(url).path))
    return None, None


def _git_checkout_origin(directory: Path) -> tuple[str | None, str | None]:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(directory), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None

    remote = git("remote", "get-url", "origin")
    return (_github_repository(remote) if remote else None), git("rev-parse", "HEAD")


def _github_repository(url: str) -> str | None:
    """``owner/name`` from an https or ssh GitHub URL (``git+`` prefix and ``.git`` suffix allowed)."""
    match = re.search(r"github\.com[:/]([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$", url)
    return f"{match.group(1)}/{match.group(2)}" if match else None


def _items(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _yaml_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _github_actions(args: argparse.Namespace) -> int:
    from ktest.public_api import VERSION

    repository, ref = args.repository, args.ref
    given = repository is not None or ref is not None
    note = ""
    if repository is None or ref is None:
        found_repository, found_ref = installed_origin()
        if given or (found_repository and found_ref):
            repository = repository or found_repository
            ref = ref or found_ref
        elif found_ref:  # a git checkout, but its origin is not on GitHub (or there is none)
            note = (
                "\nnote: this ktest is a git checkout without a GitHub 'origin' remote, so ktest's "
                "reusable workflow cannot be pinned; the workflow installs ktest "
                f"{VERSION} from PyPI instead. For the reusable one, pass --repository OWNER/ktest "
                "--ref <commit SHA>"
            )
    pinned = bool(repository and ref)  # else a self-contained workflow, unless an option was given
    if given and not pinned:
        missing = "--ref <40-hex commit SHA>" if repository else "--repository OWNER/ktest"
        raise InitError(
            "cannot tell which ktest repository and commit to pin: this ktest was not installed from "
            f"a GitHub URL or a git checkout with an 'origin' remote on GitHub.\nPass {missing} too, or "
            "neither option for a self-contained workflow that installs ktest from PyPI"
        )
    options = WorkflowOptions(
        repository=repository or "",
        ref=ref or "",
        k8s_versions=_items(args.k8s_versions or ",".join(supported_minors()[:2])),
        backends=_items(args.backends),
        shards=args.shards,
        install=args.install,
        pytest_args=args.pytest_args,
        ktest_version=VERSION,
        python_version=args.python_version,
    )
    if not pinned:
        write_workflow(args.path, render_standalone_workflow(options), force=args.force)
        print(f"wrote {args.path} (self-contained: ktest {VERSION} from PyPI); commit it and push{note}")
        return 0
    write_workflow(args.path, render_workflow(options), force=args.force)
    print(f"wrote {args.path} (ktest {repository}@{options.ref[:12]}); commit it and push")
    return 0
