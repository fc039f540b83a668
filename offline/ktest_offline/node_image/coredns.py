"""CoreDNS for the node image: the recipe's version, built with the plugins a test cluster uses.

``go install github.com/coredns/coredns@<version>`` compiles every plugin,
cloud SDKs included (6 to 7 minutes of a cold node-image build on 2 cores).
ktest builds CoreDNS the way its docs describe for custom builds instead: a
generated main module (``ktest.local/coredns``) whose ``main.go`` imports
``coremain`` and ``core/dnsserver`` plus one blank import per plugin (each
registers itself) and calls ``coremain.Run()``. ``core/plugin``, which imports
them all, is not imported. The directive order needs no setting:
``dnsserver.Directives`` (``core/dnsserver/zdirectives.go``) already lists
every plugin in order, and a directive whose plugin is not compiled in only
fails when a Corefile uses it ("no action found for directive ...").

The plugins are those of the module's own ``core/plugin/zplugin.go`` at that
version, minus :data:`LEFT_OUT`, so the list follows each release (a plugin a
release lacks is simply not there). Everything kubeadm's Corefile uses
(:data:`KUBEADM_PLUGINS`) must be present, or the build stops. Left out are
the plugins that bring a large client library nothing else in CoreDNS needs
(measured for v1.14.6 as Go source compiled on top of coremain + kubernetes +
forward + cache + metrics, which every build compiles anyway: about 34 MB):

=========  =====================================================  ===========
plugin     what it pulls in                                       extra source
=========  =====================================================  ===========
trace      dd-trace-go, OpenTelemetry, Zipkin                     8.9 MB, 229 packages
route53    AWS SDK v2 (Route 53)                                  3.7 MB, 90 packages
clouddns   Google Cloud API client                                3.4 MB, 105 packages
etcd       etcd v3 client                                         2.7 MB, 44 packages
dnssec     AWS SDK v2 (Secrets Manager, for keys kept there)      2.6 MB, 87 packages
azure      Azure SDK (autorest)                                   0.7 MB, 23 packages
nomad      Nomad API client                                       0.7 MB, 12 packages
=========  =====================================================  ===========

All the others cost under 0.4 MB each (view: 0.36 MB; geoip, sign,
secondary, file, auto, rewrite under 0.2 MB; dnstap, grpc, quic, https3
almost nothing, as ``core/dnsserver`` already compiles gRPC and quic-go) and
stay, so a Corefile a user writes for a test cluster keeps working. What remains is
mostly the kubernetes plugin's k8s.io/api and client-go (25 of the 34 MB).

Measured for v1.14.6 from empty Go caches on 2 cores (other builds running, load 5 to 13):
the full ``go install`` 518 s (302 s of CPU, 1.6 GB of modules, a 75 MB binary), this build
248 s (231 s of CPU, 0.6 GB of modules, 55 MB).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

from ktest.assets.gotool import (
    GO_BUILD_FLAGS,
    GO_TIMEOUT_SECONDS,
    PROXY_HINT,
    GoTool,
    build_atomically,
    go_env,
    log_tail,
    require_go,
    run_go,
)
from ktest.assets.progress import Progress
from ktest.backends.kind import recipe
from ktest.backends.kind.cache import KindCache
from ktest.errors import KindError

MAIN_MODULE = "ktest.local/coredns"
PLUGIN_PREFIX = f"{recipe.COREDNS_MODULE}/plugin/"
ZPLUGIN_FILE = "core/plugin/zplugin.go"
# Plugin packages (the directive ``prometheus`` is the package ``metrics``).
KUBEADM_PLUGINS = (
    "errors",
    "health",
    "ready",
    "kubernetes",
    "metrics",
    "forward",
    "cache",
    "loop",
    "reload",
    "loadbalance",
)
# Changing this list changes the cache key and the node image label (images are rebuilt); bump
# recipe.RECIPE_VERSION too, so `ktest kind images` stops calling the older images usable.
LEFT_OUT: dict[str, str] = {
    "trace": "dd-trace-go, OpenTelemetry, Zipkin",
    "route53": "AWS SDK (Route 53)",
    "clouddns": "Google Cloud API client",
    "etcd": "etcd v3 client",
    "dnssec": "AWS SDK (Secrets Manager)",
    "azure": "Azure SDK",
    "nomad": "Nomad API client",
}
PLUGINS_FILE = "coredns-plugins.txt"
METADATA_FILE = "coredns-build.json"
_IMPORT = re.compile(r'^\s*_\s+"([^"]+)"', re.MULTILINE)


def lean_key() -> str:
    """Short digest of :data:`LEFT_OUT`: part of the cache key, so a changed list is rebuilt."""
    return hashlib.sha256(" ".join(sorted(LEFT_OUT)).encode()).hexdigest()[:8]


def cache_path(cache: KindCache, version: str) -> Path:
    """``<cache>/kind/tools/coredns-<version>-lean-<key>/coredns`` (never the full build's path)."""
    return cache.tool("coredns", f"{version}-lean-{lean_key()}")


def description(version: str) -> str:
    """What the node image's CoreDNS is, in one line (a node image label)."""
    return f"{version} lean build without {', '.join(sorted(LEFT_OUT))}"


def plugin_name(import_path: str) -> str:
    """``kubernetes`` for ``github.com/coredns/coredns/plugin/kubernetes``."""
    return import_path.rstrip("/").rsplit("/", 1)[-1]


def zplugin_imports(zplugin_go: str) -> list[str]:
    """The blank imports of a ``core/plugin/zplugin.go`` text, in its order."""
    return _IMPORT.findall(zplugin_go)


def lean_imports(zplugin_go: str, version: str = "") -> list[str]:
    """The plugin packages to compile in: ``zplugin.go``'s minus :data:`LEFT_OUT`.

    A left-out plugin that a release does not have is simply absent; a release without one
    of kubeadm's plugins (or a text that is no ``zplugin.go``) raises KindError.
    """
    imports = zplugin_imports(zplugin_go)
    kept = [
        path for path in imports if not (path.startswith(PLUGIN_PREFIX) and plugin_name(path) in LEFT_OUT)
    ]
    present = {plugin_name(path) for path in kept if path.startswith(PLUGIN_PREFIX)}
    missing = [name for name in KUBEADM_PLUGINS if name not in present]
    if missing:
        raise KindError(
            f"CoreDNS {version or '(unknown version)'}'s {ZPLUGIN_FILE} lists no plugin package "
            f"{', '.join(missing)}, which kubeadm's Corefile uses, so ktest cannot build a CoreDNS "
            "for the node image from it.\nCheck the CoreDNS version in ktest/assets/minors.py MINORS "
            "(kubeadm's, from `kubeadm config images list`)."
        )
    return kept


def main_go(imports: list[str]) -> str:
    """The generated ``main.go``: coremain, dnsserver and one blank import per plugin."""
    lines = "".join(f'\t_ "{path}"\n' for path in imports)
    return (
        "// Generated by ktest (ktest_offline/node_image/coredns.py): CoreDNS with a chosen plugin set.\n"
        "package main\n\n"
        "import (\n"
        f'\t_ "{recipe.COREDNS_MODULE}/core/dnsserver"\n'
        f'\t"{recipe.COREDNS_MODULE}/coremain"\n\n'
        f"{lines}"
        ")\n\n"
        "func main() {\n\tcoremain.Run()\n}\n"
    )


def go_mod(version: str) -> str:
    """The generated ``go.mod`` (``go mod tidy`` adds the ``go`` line and the rest)."""
    return f"module {MAIN_MODULE}\n\nrequire {recipe.COREDNS_MODULE} {version}\n"


def module_source(go: GoTool, version: str, scratch: Path, log: Path) -> Path:
    """The directory of ``github.com/coredns/coredns@<version>`` in the module cache (downloaded)."""
    target = f"{recipe.COREDNS_MODULE}@{version}"
    try:
        finished = subprocess.run(
            [go.path, "mod", "download", "-json", target],
            cwd=scratch,
            env=go_env(),
            capture_output=True,
            text=True,
            timeout=GO_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as cause:
        raise KindError(
            f"downloading CoreDNS {version}: `go mod download {target}` failed: {cause}"
        ) from cause
    try:
        info = json.loads(finished.stdout or "{}")
    except json.JSONDecodeError:
        info = {}
    directory = info.get("Dir")
    if finished.returncode != 0 or not directory:
        log.write_text(finished.stdout + finished.stderr)
        raise KindError(
            f"downloading CoreDNS {version}: `go mod download {target}` exited with {finished.returncode}"
            f"{': ' + str(info['Error']) if info.get('Error') else ''}.\n"
            f"Last lines of its output (full output: {log}):\n{log_tail(log)}\n{PROXY_HINT}"
        )
    return Path(directory)


def listed_plugins(binary: Path) -> list[str]:
    """The plugins ``coredns -plugins`` lists (``kubernetes``, ``forward``, ..., ``on``)."""
    finished = subprocess.run(
        [str(binary), "-plugins"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if finished.returncode != 0:
        raise KindError(
            f"the CoreDNS just built ({binary}) does not run: `coredns -plugins` exited with "
            f"{finished.returncode}: {(finished.stdout + finished.stderr).strip()[-500:]}"
        )
    section = finished.stdout.split("Other plugins:", 1)[-1]
    return [line.strip().removeprefix("dns.") for line in section.splitlines() if line.strip()]


def build_lean_coredns(version: str, destination: Path, progress: Progress, go: GoTool | None = None) -> Path:
    """Build CoreDNS ``version`` with the lean plugin set into ``destination`` (unless it is there).

    Next to it: :data:`PLUGINS_FILE` (``coredns -plugins``) and :data:`METADATA_FILE`; on a
    failure the build log ``<destination>.log``, named in the KindError.
    """
    go = go or require_go(f"building CoreDNS {version}")
    what = f"building CoreDNS {version} (lean plugin set) from Go modules, first time only"

    def build(scratch: Path, log: Path) -> Path:
        started = time.monotonic()
        with progress.step(what):
            source = module_source(go, version, scratch, log)
            try:
                zplugin = (source / ZPLUGIN_FILE).read_text()
            except OSError as cause:
                raise KindError(
                    f"CoreDNS {version} from the Go module cache has no readable {ZPLUGIN_FILE} "
                    f"({cause.strerror or cause}) in {source}: it is not a CoreDNS release ktest can build.\n"
                    "Check the CoreDNS version in ktest/assets/minors.py MINORS."
                ) from cause
            imports = lean_imports(zplugin, version)
            (scratch / "go.mod").write_text(go_mod(version))
            (scratch / "main.go").write_text(main_go(imports))
            env = go_env()
            for command in (
                [go.path, "mod", "tidy"],
                [go.path, "build", *GO_BUILD_FLAGS, "-ldflags", "-s -w", "-o", "coredns", "."],
            ):
                run_go(command, scratch, env, log, f"building CoreDNS {version} (lean)")
        built = scratch / "coredns"
        plugins = listed_plugins(built)
        unexpected = sorted(set(plugins) & set(LEFT_OUT))
        if unexpected or "kubernetes" not in plugins:
            raise KindError(
                f"the lean CoreDNS {version} lists the plugins {', '.join(plugins)}: "
                f"{'it has ' + ', '.join(unexpected) if unexpected else 'kubernetes is missing'}. "
                f"The generated main module is in {scratch}; this is a bug in ktest."
            )
        (destination.parent / PLUGINS_FILE).write_text("\n".join(plugins) + "\n")
        metadata = {
            "version": version,
            "lean": True,
            "left_out": sorted(LEFT_OUT),
            "plugins": plugins,
            "go_version": go.version,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.monotonic() - started, 1),
        }
        (destination.parent / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
        built.chmod(0o755)
        return built

    return build_atomically(destination, build)


def coredns_binary(version: str, cache: KindCache, progress: Progress) -> Path:
    """The lean CoreDNS ``version`` from the kind cache, built there the first time."""
    destination = cache_path(cache, version)
    if not (destination.is_file() and os.access(destination, os.X_OK)):
        build_lean_coredns(version, destination, progress)
    plugins = destination.parent / PLUGINS_FILE
    count = len(plugins.read_text().split()) if plugins.is_file() else "?"
    progress.note(f"CoreDNS {description(version)}: {count} plugins, listed in {plugins}")
    return destination
