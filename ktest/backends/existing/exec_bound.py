"""An exec credential plugin with a time limit.

The kubernetes client runs a kubeconfig's exec plugin (``aws eks get-token``, ``kubelogin``...)
and waits for it without a limit: one that waits for a browser login, or hangs, stopped the
session's start for good, saying nothing. So ktest's private copy of the kubeconfig runs the
plugin through this file (``python -I -S exec_bound.py --timeout S --what TEXT --cwd DIR --
COMMAND ARGS...``, standard library only: it starts in milliseconds), which passes the
plugin's output through, and after ``S`` seconds kills the plugin (its whole process group)
and exits 1 with a message naming the plugin and what waited for it, which the client puts
in its error.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from typing import Any

EXIT_TIMED_OUT = 1


def bounded_exec(exec_config: dict[str, Any], *, timeout: float, what: str, cwd: str) -> dict[str, Any]:
    """A copy of ``exec_config`` (a kubeconfig user's ``exec``) that runs its command through
    this file, killed after ``timeout`` seconds; ``what`` names the plugin for the message,
    ``cwd`` is where the plugin runs (the user's kubeconfig's directory, as kubectl does)."""
    command = [str(exec_config.get("command") or ""), *map(str, exec_config.get("args") or ())]
    wrapper = [
        "-I", "-S", os.path.abspath(__file__),
        "--timeout", f"{timeout:g}", "--what", what, "--cwd", cwd, "--", *command,
    ]
    return {**exec_config, "command": sys.executable, "args": wrapper}


def main(argv: list[str]) -> int:
    options: dict[str, str] = {}
    while argv and argv[0] != "--":
        options[argv[0]] = argv[1]
        argv = argv[2:]
    command = argv[1:]
    timeout = float(options["--timeout"])
    try:
        plugin = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=options.get("--cwd") or None,
                                  start_new_session=True)
    except OSError as error:
        sys.stderr.write(f"{options.get('--what')}: cannot start {shlex.join(command)}: {error.strerror}\n")
        return EXIT_TIMED_OUT
    try:
        output, _ = plugin.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(plugin.pid, signal.SIGKILL)
        except OSError:
            plugin.kill()
        plugin.communicate()
        sys.stderr.write(
            f"{options.get('--what')}: `{shlex.join(command)}` did not finish within {timeout:g} s, "
            "so ktest stopped it. A plugin that waits for a login (a browser, a prompt) cannot get "
            "one in a test run: log in first (run the plugin, or `kubectl auth whoami`, by hand), "
            "then start the tests again.\n"
        )
        return EXIT_TIMED_OUT
    sys.stdout.buffer.write(output)
    return plugin.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
