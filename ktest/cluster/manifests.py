"""Load Kubernetes objects from dicts, YAML strings, files and directories.

Errors name the file, the document and its line, because a typo in a
manifest is the most common way a test suite fails before it starts.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import yaml

from ktest.errors import ManifestError

ManifestSource = Union[Mapping[str, Any], str, "os.PathLike[str]", Iterable[Any]]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# kustomize's own files sit beside manifests in kubebuilder layouts; they are not objects.
KUSTOMIZE_FILES = frozenset({"kustomization.yaml", "kustomization.yml", "kustomizeconfig.yaml"})


@dataclass(frozen=True)
class Manifest:
    """One object and where it came from (for error messages)."""

    obj: dict[str, Any]
    origin: str  # "path/to/file.yaml, document 2 (line 14)" or "<dict>"

    @property
    def ref_text(self) -> str:
        meta = self.obj.get("metadata") or {}
        name = meta.get("name") or meta.get("generateName", "?") + "*"
        return f"{self.obj.get('kind')} {name}"


def load_manifests(source: ManifestSource, *, namespace: str | None = None) -> list[dict[str, Any]]:
    """The objects in ``source``, each a fresh dict; see :func:`load_located`."""
    return [m.obj for m in load_located(source, namespace=namespace)]


def load_located(source: ManifestSource, *, namespace: str | None = None) -> list[Manifest]:
    """Objects from a dict, a YAML/JSON string, a file, a directory, or a list of those.

    Directories are searched recursively for ``.yaml``, ``.yml`` and ``.json``
    files, in sorted order. ``List`` objects are expanded. ``namespace`` is set
    on objects that have none (the API server ignores it for cluster-scoped kinds,
    and :class:`~ktest.cluster.Cluster` drops it for them).
    """
    manifests = list(_iter_source(source))
    for manifest in manifests:
        _validate(manifest)
        if namespace is not None:
            manifest.obj.setdefault("metadata", {}).setdefault("namespace", namespace)
    return manifests


def manifest_files(path: Path) -> list[Path]:
    """The manifest files under ``path`` (itself if it is a file), sorted."""
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and p.suffix in MANIFEST_SUFFIXES and p.name not in KUSTOMIZE_FILES
        )
    if path.is_file():
        return [path]
    raise ManifestError(f"{path}: no such file or directory")


def _iter_source(source: Any) -> Iterator[Manifest]:
    if isinstance(source, Mapping):
        yield from _expand(copy.deepcopy(dict(source)), "<dict>")
    elif isinstance(source, os.PathLike):
        yield from _iter_path(Path(source))
    elif isinstance(source, str):
        if _looks_like_path(source):
            yield from _iter_path(Path(source))
        else:
            yield from _iter_yaml(source, "<YAML string>")
    elif isinstance(source, Iterable):
        for item in source:
            yield from _iter_source(item)
    else:
        raise ManifestError(
            f"cannot load objects from {type(source).__name__}: pass a dict, a YAML string, "
            "a file or directory path, or a list of these"
        )


def _looks_like_path(text: str) -> bool:
    if "\n" in text:
        return False
    return text.endswith(MANIFEST_SUFFIXES) or os.path.exists(text)


def _iter_path(path: Path) -> Iterator[Manifest]:
    for file in manifest_files(path):
        try:
            text = file.read_text()
        except OSError as error:
            raise ManifestError(f"{file}: cannot read: {error.strerror}") from None
        yield from _iter_yaml(text, str(file))


def _iter_yaml(text: str, where: str) -> Iterator[Manifest]:
    loader = yaml.SafeLoader(text)
    try:
        index = 0
        while True:
            try:
                if not loader.check_node():
                    break
                node = loader.get_node()
            except yaml.YAMLError as error:
                mark = getattr(error, "problem_mark", None)
                line = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
                problem = getattr(error, "problem", None) or str(error)
                raise ManifestError(
                    f"{where}:{line}: not valid YAML: {problem}. Fix the syntax at that line."
                ) from None
            index += 1
            if node is None:
                continue
            data = loader.construct_document(node)
            if data is None:
                continue  # an empty document between two '---'
            origin = f"{where}, document {index} (line {node.start_mark.line + 1})"
            if not isinstance(data, dict):
                raise ManifestError(
                    f"{origin}: expected a Kubernetes object (a mapping with apiVersion and kind), "
                    f"got a {type(data).__name__}"
                )
            yield from _expand(data, origin)
    finally:
        loader.dispose()


def _expand(obj: dict[str, Any], origin: str) -> Iterator[Manifest]:
    kind = obj.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list):
        for position, item in enumerate(obj["items"]):
            yield from _expand(item, f"{origin}, item {position}")
    else:
        yield Manifest(obj, origin)


def _validate(manifest: Manifest) -> None:
    obj = manifest.obj
    missing = [key for key in ("apiVersion", "kind") if not obj.get(key)]
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
        missing.append("metadata.name")
    if missing:
        raise ManifestError(
            f"{manifest.origin}: not a Kubernetes object: missing {', '.join(missing)}. "
            "Every object needs apiVersion, kind and metadata.name."
        )
