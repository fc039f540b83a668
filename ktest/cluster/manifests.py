"""Load Kubernetes objects from dicts, YAML strings, files and directories.

Errors name the file, the document and its line: a typo in a manifest is the most common way a
suite fails before it starts. YAML is parsed with PyYAML's safe loader (libyaml's when installed),
and a document whose aliases expand past :data:`MAX_EXPANDED_NODES` nodes (an alias bomb) or that
refers to itself is refused while parsing, as are files that are not UTF-8 text, tags (``!!python/...``,
``!custom``), keys that are lists or mappings, integers longer than :data:`MAX_INTEGER_DIGITS` and
nesting deeper than :data:`MAX_NESTING`: each a :class:`~ktest.errors.ManifestError` naming file and line.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

from ktest.errors import ManifestError

ManifestSource = Union[Mapping[str, Any], str, "os.PathLike[str]", Iterable[Any]]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# kustomize's own files sit beside manifests in kubebuilder layouts; they are not objects.
KUSTOMIZE_FILES = frozenset({"kustomization.yaml", "kustomization.yml", "kustomizeconfig.yaml"})

MAX_EXPANDED_NODES = 1_000_000
"""The most YAML nodes a document may expand to through its aliases (``*name``). A real
object that large could not be sent anyway (the API server takes 3 MiB bodies); an alias
bomb of a few hundred bytes expands to billions."""

MAX_NESTING = 200
"""The deepest a document's mappings and lists may nest. Real objects (CRD schemas included) stay
far below; deeper ones would exhaust Python's recursion (copying, JSON encoding) part-way through
an install instead of being refused before it."""

MAX_INTEGER_DIGITS = 100
"""The longest integer a document may hold. Kubernetes numbers are 64-bit (19 digits); Python
refuses to even read integers of more than 4,300 digits."""

_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "seq", "map", "merge", "timestamp")
)

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

FieldPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Manifest:
    """One object and where it came from (for error messages)."""

    obj: dict[str, Any]
    origin: str  # "path/to/file.yaml, document 2 (line 14)" or "<dict>"
    node: yaml.Node | None = field(default=None, compare=False, repr=False)
    """The YAML node the object was built from (None for dicts): where each field's line is."""

    @property
    def ref_text(self) -> str:
        meta = self.obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = meta.get("name") or f"{meta.get('generateName', '?')}*"
        return f"{self.obj.get('kind')} {name}"

    def line_of(self, path: FieldPath) -> int | None:
        """The 1-based line of the field at ``path`` (keys and list positions; for a key, the line
        of the key itself), or of the nearest enclosing field present in the YAML; None for
        objects not read from YAML."""
        node = self.node
        if node is None:
            return None
        mark = node.start_mark
        for step in path:
            found = _child_entry(node, step)
            if found is None:
                break
            mark, node = found[0].start_mark, found[1]
        return int(mark.line) + 1


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


def load_as(source: ManifestSource, error: type[Exception], context: str) -> list[Manifest]:
    """:func:`load_located`, its :class:`~ktest.errors.ManifestError` raised as the caller's kind
    of ``error``, ``"<context>: <what is wrong, file and document>"``."""
    try:
        return load_located(source)
    except ManifestError as cause:
        raise error(f"{context}: {cause}") from None


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
        _refuse_deep_data(source, "<dict>")
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
    return "\n" not in text and (text.endswith(MANIFEST_SUFFIXES) or os.path.exists(text))


def _iter_path(path: Path) -> Iterator[Manifest]:
    for file in manifest_files(path):
        try:
            data = file.read_bytes()
        except OSError as error:
            raise ManifestError(f"{file}: cannot read: {error.strerror}") from None
        yield from _iter_yaml(_utf8_text(data, str(file)), str(file))


def _utf8_text(data: bytes, where: str) -> str:
    """``data`` decoded as UTF-8, or a ManifestError naming the line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ManifestError(
            f"{where}: line {line}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}; "
            "a binary file?). Manifests are UTF-8 YAML or JSON: save it as UTF-8, or move it out "
            "of the manifest path."
        ) from None


def _iter_yaml(text: str, where: str) -> Iterator[Manifest]:
    loader = _Loader(text)
    try:
        index = 0
        while True:
            try:
                if not loader.check_node():
                    break
                node = loader.get_node()
            except yaml.YAMLError as error:
                raise ManifestError(_syntax_error(error, where, text)) from None
            except RecursionError:
                raise ManifestError(_too_deep(where, None)) from None
            index += 1
            if node is None:
                continue
            origin = f"{where}, document {index} (line {node.start_mark.line + 1})"
            _refuse_alias_bombs(node, origin)
            _refuse_unplain_nodes(node, origin)
            try:
                data = loader.construct_document(node)
            except yaml.YAMLError as error:  # _refuse_unplain_nodes leaves none known; a last net
                raise ManifestError(f"{origin}: cannot read it: {_problem(error)}") from None
            except (ValueError, RecursionError) as error:
                raise ManifestError(f"{origin}: cannot read it: {error}") from None
            if data is None:
                continue  # an empty document between two '---'
            if not isinstance(data, dict):
                raise ManifestError(
                    f"{origin}: expected a Kubernetes object (a mapping with apiVersion and kind), "
                    f"got a {type(data).__name__}"
                )
            yield from _expand(data, origin, node)
    finally:
        loader.dispose()


def _problem(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    line = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return line + str(getattr(error, "problem", None) or error)


def _syntax_error(error: yaml.YAMLError, where: str, text: str) -> str:
    if isinstance(error, yaml.reader.ReaderError):  # a control character: usually a binary file
        at = text[: error.position].count("\n") + 1
        character = error.character if isinstance(error.character, int) else ord(error.character)
        return (
            f"{where}: line {at}: the control character U+{character:04X} is not allowed in "
            "YAML (a binary file?). Remove it, or move the file out of the manifest path."
        )
    mark = getattr(error, "problem_mark", None)
    line = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(error, "problem", None) or str(error)
    return f"{where}:{line}: not valid YAML: {problem}. Fix the syntax at that line."


def _too_deep(origin: str, line: int | None) -> str:
    at = f" (at line {line})" if line is not None else ""
    return (
        f"{origin}: nested more than {MAX_NESTING} levels deep{at}: no Kubernetes object is; "
        "flatten it, or check for runaway brackets."
    )


def _refuse_unplain_nodes(root: yaml.Node, origin: str) -> None:
    """ManifestError for what no Kubernetes object holds, at its line: a tag other than YAML's
    plain ones (``!!python/...`` would build Python objects, ``!custom`` nothing at all), a key
    that is a list or mapping, an integer over MAX_INTEGER_DIGITS digits, nesting deeper than
    MAX_NESTING. Iterative; a node shared through aliases is checked once, at its deepest use."""
    deepest: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        line = node.start_mark.line + 1
        if depth > MAX_NESTING:
            raise ManifestError(_too_deep(origin, line))
        if deepest.get(id(node), 0) >= depth:
            continue
        deepest[id(node)] = depth
        if node.tag not in _PLAIN_TAGS:
            raise ManifestError(
                f"{origin}: line {line}: the tag {node.tag} is not plain YAML: ktest reads manifests "
                "with a safe loader, which builds no Python objects and knows no custom tags. "
                "Remove the tag (quote the value if it is text)."
            )
        if node.tag == "tag:yaml.org,2002:int" and len(str(node.value)) > MAX_INTEGER_DIGITS:
            raise ManifestError(
                f"{origin}: line {line}: an integer of {len(str(node.value)):,} characters; Kubernetes "
                f"numbers are 64-bit (ktest reads at most {MAX_INTEGER_DIGITS} digits). "
                "Quote it if it is text."
            )
        if isinstance(node, yaml.MappingNode):
            for key, _value in node.value:
                if not isinstance(key, yaml.ScalarNode):
                    raise ManifestError(
                        f"{origin}: line {key.start_mark.line + 1}: a mapping key that is a "
                        f"{'list' if isinstance(key, yaml.SequenceNode) else 'mapping'} (a complex "
                        "key, `? [...]` or `{...}: ...`); Kubernetes objects have text keys. "
                        "Write the key as a string."
                    )
        stack.extend((child, depth + 1) for child in _children(node))


def _refuse_deep_data(data: Any, origin: str) -> None:
    """ManifestError if ``data`` (a dict given in Python) nests deeper than MAX_NESTING."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ManifestError(_too_deep(origin, None))
        if isinstance(value, Mapping):
            stack.extend((child, depth + 1) for child in value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend((child, depth + 1) for child in value)


def _refuse_alias_bombs(root: yaml.Node, origin: str) -> None:
    """ManifestError if the document's aliases expand it past MAX_EXPANDED_NODES nodes or make
    it contain itself. Counts each node as often as aliases repeat it, in one pass over the
    distinct nodes (a shared node's count is remembered), so a bomb costs no more to check
    than to compose; iterative, so deep nesting needs no Python recursion."""
    expanded: dict[int, int] = {}
    in_progress: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in expanded:
            continue
        children = _children(node)
        if children_done:
            in_progress.discard(key)
            total = 1 + sum(expanded[id(child)] for child in children)
            if total > MAX_EXPANDED_NODES:
                raise ManifestError(
                    f"{origin}: its aliases (*name) expand it to more than "
                    f'{MAX_EXPANDED_NODES:,} YAML nodes (an alias bomb, "billion laughs"): '
                    "refused while parsing. Write the repeated parts out, or repeat them less."
                )
            expanded[key] = total
            continue
        for looped in (node, *children):
            if id(looped) in in_progress:
                raise ManifestError(
                    f"{origin}: the node at line {looped.start_mark.line + 1} contains itself through an "
                    "alias: the object would be endless. Remove the alias that refers back to its own anchor."
                )
        in_progress.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) not in expanded:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return []


def _child_entry(node: yaml.Node, step: str | int) -> tuple[yaml.Node, yaml.Node] | None:
    """The (key or item, value) nodes of ``step`` in a mapping or sequence node, or None."""
    if isinstance(node, yaml.MappingNode) and isinstance(step, str):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == step:
                return key, value
    if isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
        return node.value[step], node.value[step]
    return None


def _child_node(node: yaml.Node, step: str | int) -> yaml.Node | None:
    found = _child_entry(node, step)
    return found[1] if found is not None else None


def _expand(obj: dict[str, Any], origin: str, node: yaml.Node | None = None) -> Iterator[Manifest]:
    kind = obj.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list):
        items_node = _child_node(node, "items") if node is not None else None
        for position, item in enumerate(obj["items"]):
            item_origin = f"{origin}, item {position}"
            item_node = _child_node(items_node, position) if items_node is not None else None
            if not isinstance(item, dict):
                line = f" (line {item_node.start_mark.line + 1})" if item_node is not None else ""
                raise ManifestError(
                    f"{item_origin}{line}: expected a Kubernetes object in the {kind}'s items "
                    f"(a mapping with apiVersion and kind), got a {type(item).__name__}"
                )
            yield from _expand(item, item_origin, item_node)
    else:
        yield Manifest(obj, origin, node)


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
