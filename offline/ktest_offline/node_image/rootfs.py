"""The node's Debian root filesystem: ``debootstrap --variant=minbase`` from the host's apt mirror.

The result is a tar (``<cache>/kind/rootfs/<key>/rootfs.tar``) keyed by the
suite and package list; it becomes the node image's base layer and the
kube-proxy image's (kube-proxy runs iptables/nft/conntrack from it).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from ktest.assets.gotool import log_tail
from ktest.assets.progress import Progress, holding_lock
from ktest.backends.kind import recipe
from ktest.errors import KindError

MIRROR_ENV = "KTEST_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
_APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
# debootstrap's phase lines ("I: Installing core packages...") are the progress worth showing.
_PHASES = re.compile(
    r"^I: (Retrieving (Release|Packages)|Resolving|Found|Checking|Installing core|"
    r"(Unpacking|Configuring) (required|the base)|Base system installed)"
)
_DEBOOTSTRAP_TIMEOUT = 1800.0


def rootfs_key() -> str:
    """``bookworm-<hash of the package list>``: a new list means a new root filesystem."""
    digest = hashlib.sha256(" ".join(sorted(recipe.DEBOOTSTRAP_PACKAGES)).encode()).hexdigest()
    return f"{recipe.DEBIAN_SUITE}-{digest[:12]}"


def _source_uris(paths: Iterable[Path]) -> list[tuple[str, list[str]]]:
    """(uri, suites) from one-line ``deb`` entries and deb822 ``.sources`` stanzas."""
    found: list[tuple[str, list[str]]] = []
    for path in paths:
        files = sorted(path.iterdir()) if path.is_dir() else [path]
        for file in files:
            try:
                text = file.read_text()
            except OSError:
                continue
            if file.suffix == ".sources":
                for stanza in re.split(r"\n\s*\n", text):
                    fields = dict(
                        (key.strip().lower(), value.strip())
                        for key, _, value in (
                            line.partition(":")
                            for line in stanza.splitlines()
                            if ":" in line and not line.lstrip().startswith("#")
                        )
                    )
                    for uri in fields.get("uris", "").split():
                        found.append((uri, fields.get("suites", "").split()))
            else:
                for line in text.splitlines():
                    words = re.sub(r"\[[^]]*\]", "", line).split()
                    if len(words) >= 3 and words[0] == "deb":
                        found.append((words[1], [words[2]]))
    return found


def debian_mirror(env: dict[str, str] | None = None) -> str:
    """``KTEST_DEBIAN_MIRROR``, else the host apt source serving the suite, else deb.debian.org."""
    env = dict(os.environ) if env is None else env
    if env.get(MIRROR_ENV):
        return env[MIRROR_ENV]
    for uri, suites in _source_uris(_APT_SOURCES):
        if recipe.DEBIAN_SUITE in suites and "security" not in uri:
            return uri
    return DEFAULT_MIRROR


def build_rootfs(destination: Path, progress: Progress) -> Path:
    """Run debootstrap into a scratch directory, tar it to ``destination`` (atomically)."""
    if destination.is_file():
        return destination
    debootstrap = shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").is_file() else None
    )
    if debootstrap is None:
        raise KindError(
            "building the node's root filesystem needs debootstrap, which is not installed.\n"
            "Install it (Debian: `apt-get install debootstrap`; ktest's `scripts/docker-engine` does)."
        )
    if os.geteuid() != 0:
        raise KindError(
            "building the node's root filesystem runs debootstrap, which needs root; this process "
            f"runs as uid {os.geteuid()}.\nRun `ktest kind build-image` as root (once; the image is cached)."
        )
    destination.parent.mkdir(parents=True, exist_ok=True)
    lock = destination.with_name("rootfs.lock")
    with holding_lock(lock, progress, "another process is building the root filesystem"):
        if destination.is_file():
            return destination
        return _debootstrap(debootstrap, destination, progress)


def _debootstrap(debootstrap: str, destination: Path, progress: Progress) -> Path:
    mirror = debian_mirror()
    scratch = Path(tempfile.mkdtemp(prefix=".tmp-rootfs-", dir=destination.parent))
    root = scratch / "root"
    log = destination.with_name("debootstrap.log")
    command = [
        debootstrap,
        "--variant=minbase",
        f"--include={','.join(recipe.DEBOOTSTRAP_PACKAGES)}",
        recipe.DEBIAN_SUITE,
        str(root),
        mirror,
    ]
    try:
        with progress.step(f"debootstrap {recipe.DEBIAN_SUITE} from {mirror} (node root filesystem)"):
            _run_logged(command, log, progress)
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for child in (root / leftover).glob("*"):
                if child.is_file():
                    child.unlink()
        partial = scratch / "rootfs.tar"
        with progress.step("packing the root filesystem"):
            finished = subprocess.run(
                ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(partial), "."],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        if finished.returncode != 0:
            raise KindError(f"packing {root} failed: {finished.stderr.strip()[-1000:]}")
        os.replace(partial, destination)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(scratch)], check=False)
    return destination


def _run_logged(command: list[str], log: Path, progress: Progress) -> None:
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        timer = threading.Timer(_DEBOOTSTRAP_TIMEOUT, process.kill)
        timer.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                out.write(line)
                if _PHASES.match(line):
                    progress.note(f"  debootstrap: {line[3:].strip()}")
            code = process.wait()
        except BaseException:
            process.kill()
            process.wait()
            raise
        finally:
            timer.cancel()
    if code != 0:
        raise KindError(
            f"debootstrap exited with {code}.\nLast lines of its log (full log: {log}):\n{log_tail(log)}\n"
            "Check that the Debian mirror is reachable (set KTEST_DEBIAN_MIRROR to another one)."
        )
