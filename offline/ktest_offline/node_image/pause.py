"""The pause binary (the pod sandbox's process): ``pause.c`` beside this file, ``gcc -static``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ktest.assets.progress import Progress
from ktest.errors import KindError

SOURCE = Path(__file__).with_name("pause.c")


def build_pause(destination: Path, progress: Progress) -> Path:
    """Compile ``pause.c`` statically to ``destination`` unless it is there already."""
    if destination.is_file():
        return destination
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise KindError(
            "building the pause binary needs a C compiler with a static libc, but neither gcc nor cc "
            "is on PATH.\nInstall one (Debian: `apt-get install gcc libc6-dev`) and run the command again."
        )
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(f".{destination.name}-{os.getpid()}.partial")
    command = [compiler, "-Os", "-static", "-Wall", "-o", str(partial), str(SOURCE)]
    with progress.step("compiling pause (gcc -static)"):
        finished = subprocess.run(
            command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, check=False
        )
    if finished.returncode != 0:
        partial.unlink(missing_ok=True)
        raise KindError(
            f"compiling {SOURCE} failed (`{' '.join(command)}` exited with {finished.returncode}):\n"
            f"{finished.stderr.strip()[-2000:]}\n"
            "A static libc is needed (Debian: `apt-get install libc6-dev`)."
        )
    subprocess.run(["strip", str(partial)], capture_output=True, check=False)
    os.replace(partial, destination)
    return destination
