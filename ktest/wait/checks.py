"""When a check passes, and which of its errors mean "not there yet".

The rule (also in the docs, docs/guides/waiting.md):

* it returns a truthy value: passed (``eventually`` returns that value);
* it is *assertion-style* and runs to its end: passed (such a check can only
  fail by raising).  Assertion-style means a ``def`` with no ``return <value>``
  statement, or a lambda whose whole body is a call of one
  (``lambda: assert_ready(obj)``);
* it returns a falsy value (``False``, ``None``, ``0``, ``""``, ``[]``, ``{}``):
  not yet, so ``lambda: obj.get("x")`` returning ``None`` is retried, never a pass;
* it raises ``AssertionError``: not yet;
* it raises a lookup error, i.e. ``KeyError``/``IndexError`` or the
  ``TypeError``/``AttributeError`` of using ``None`` as an object
  (``obj["status"]["phase"]`` before status is written): not yet, and the
  message names the missing key and the expression that looked it up.

``eventually`` retries "not yet" until its timeout; ``consistently`` breaks on it.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import threading
import traceback
import types
from collections.abc import Callable
from typing import Any

_NONE_MESSAGES = ("'NoneType' object", "argument of type 'NoneType'")


def check_code(fn: Callable[..., Any]) -> types.CodeType | None:
    """The code object that runs when ``fn`` is called: through partials, bound
    methods, decorators that set ``__wrapped__`` and callable objects."""
    current: Any = fn
    for _ in range(10):  # a bounded walk: a callable may wrap itself
        if isinstance(current, functools.partial):
            current = current.func
        elif inspect.ismethod(current):
            current = current.__func__
        elif getattr(current, "__wrapped__", None) is not None:
            current = current.__wrapped__
        elif isinstance(current, (types.FunctionType, types.BuiltinFunctionType, type)):
            break
        elif callable(current):
            current = type(current).__call__
        else:
            break
    return getattr(current, "__code__", None)


def is_assertion_style(fn: Callable[..., Any], _depth: int = 0) -> bool:
    """True if ``fn`` passes by running to its end: a ``def`` without ``return <value>``,
    or a lambda that only calls one.  False for functions that return values and for
    checks whose source cannot be read (the safe side: their ``None`` means "not yet")."""
    code = check_code(fn)
    if code is None or _depth > 3:
        return False
    if code.co_name != "<lambda>":
        return _returns_no_value(code)
    node = lambda_node(code)
    if node is None or not isinstance(node.body, ast.Call):
        return False
    callee = _resolve(node.body.func, fn, code)
    return callee is not None and callable(callee) and is_assertion_style(callee, _depth + 1)


def lambda_source(fn: Callable[..., Any]) -> str | None:
    """The source text of the lambda ``fn`` itself (not the rest of its line), if readable."""
    code = getattr(fn, "__code__", None)
    node = lambda_node(code) if code is not None else None
    if code is None or node is None:
        return None
    return source_segment(linecache.getlines(code.co_filename), node)


def source_segment(lines: list[str], node: ast.expr) -> str | None:
    """What ``ast.get_source_segment`` gives, from the file's lines as ``linecache`` holds them:
    that function splits the whole source into lines on each call (milliseconds in a test
    module), and ``eventually`` asks for its check's text on every call."""
    end_line, end_col = node.end_lineno, node.end_col_offset
    if end_line is None or end_col is None or end_line > len(lines):
        return None
    picked = [line.encode() for line in lines[node.lineno - 1:end_line]]  # offsets count UTF-8 bytes
    if len(picked) == 1:
        return picked[0][node.col_offset:end_col].decode()
    picked[0], picked[-1] = picked[0][node.col_offset:], picked[-1][:end_col]
    return b"".join(picked).decode()


def source_unknown(fn: Callable[..., Any]) -> bool:
    """True if ktest cannot read the source of ``fn`` (for the hint in messages)."""
    code = check_code(fn)
    if code is None:
        return False
    if code.co_name == "<lambda>":
        return lambda_node(code) is None
    return function_node(code) is None


@functools.lru_cache(maxsize=1024)
def _returns_no_value(code: types.CodeType) -> bool:
    node = function_node(code)
    if node is None:
        return False
    return not any(_has_value(child) for child in _own_nodes(node))


def parsed(filename: str) -> ast.Module | None:
    """The syntax tree of a source file (as ``linecache`` has it), or None."""
    lines = linecache.getlines(filename)
    if not lines:
        return None
    return _parse("".join(lines))


# Python 3.11 can raise a spurious SystemError ("AST constructor recursion depth mismatch")
# when ASTs are built in two threads at once (CPython gh-106905): ktest's own parses take
# turns, and one that still meets it (another library parsing meanwhile) is tried again.
_PARSE_LOCK = threading.Lock()
_PARSE_ATTEMPTS = 3


@functools.lru_cache(maxsize=64)
def _parse(source: str) -> ast.Module | None:
    for attempt in range(1, _PARSE_ATTEMPTS + 1):
        try:
            with _PARSE_LOCK:
                return ast.parse(source)
        except (SyntaxError, ValueError):
            return None
        except SystemError:
            if attempt == _PARSE_ATTEMPTS:
                raise
    return None


_Def = ast.FunctionDef | ast.AsyncFunctionDef


@functools.lru_cache(maxsize=64)
def _by_line(tree: ast.Module) -> dict[int, list[ast.Lambda | _Def]]:
    """A file's lambdas and defs by the lines their code starts on (a def: its own line and its
    first decorator's), in walk order: one walk of the tree, not one per ``eventually`` call."""
    index: dict[int, list[ast.Lambda | _Def]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda):
            index.setdefault(node.lineno, []).append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = {node.lineno, node.decorator_list[0].lineno if node.decorator_list else node.lineno}
            for line in sorted(lines):
                index.setdefault(line, []).append(node)
    return index


def lambdas_on_line(code: types.CodeType) -> list[ast.Lambda]:
    """The lambdas that start on ``code``'s first line of its file."""
    tree = parsed(code.co_filename)
    nodes = _by_line(tree).get(code.co_firstlineno, []) if tree is not None else []
    return [node for node in nodes if isinstance(node, ast.Lambda)]


def function_node(code: types.CodeType) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The ``def`` of ``code`` in its file, or None."""
    tree = parsed(code.co_filename)
    for node in _by_line(tree).get(code.co_firstlineno, []) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            return node
    return None


def lambda_node(code: types.CodeType) -> ast.Lambda | None:
    """The lambda of ``code`` in its file; when a line holds several, the innermost one
    whose body spans every instruction of ``code`` (Python 3.11+ positions)."""
    candidates = lambdas_on_line(code)
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    positions = getattr(code, "co_positions", None)
    if positions is None:
        return None
    spans = [(line, col, end_line, end_col) for line, end_line, col, end_col in positions()
             if line is not None and col is not None and end_line is not None and end_col is not None
             and (col, end_col) != (0, 0)]

    def contains(node: ast.Lambda) -> bool:
        body = node.body
        end = (body.end_lineno or body.lineno, body.end_col_offset or 0)
        return all((body.lineno, body.col_offset) <= (line, col) and (end_line, end_col) <= end
                   for line, col, end_line, end_col in spans)

    inside = [node for node in candidates if contains(node)]
    if not inside:
        return None
    return min(inside, key=lambda node: ((node.end_lineno or 0) - node.lineno,
                                         (node.end_col_offset or 0) - node.col_offset))


def _resolve(expression: ast.expr, fn: Callable[..., Any], code: types.CodeType) -> Any:
    """The object a callee expression (``name`` or ``name.attr...``) names, looked up in
    the lambda's closure, globals and builtins without running any code (no property
    or ``__getattr__`` is triggered).  None if it is anything else."""
    attributes: list[str] = []
    while isinstance(expression, ast.Attribute):
        attributes.insert(0, expression.attr)
        expression = expression.value
    if not isinstance(expression, ast.Name):
        return None
    name = expression.id
    function = fn
    while isinstance(function, functools.partial):
        function = function.func
    closure = getattr(function, "__closure__", None) or ()
    scope: dict[str, Any] = {}
    for var, cell in zip(code.co_freevars, closure, strict=False):
        try:
            scope[var] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    namespaces = [scope, getattr(function, "__globals__", {}), vars(builtins)]
    found = next((space[name] for space in namespaces if name in space), None)
    for attribute in attributes:
        if found is None:
            return None
        try:
            found = inspect.getattr_static(found, attribute)
        except AttributeError:
            return None
        if isinstance(found, (staticmethod, classmethod)):
            found = found.__func__
    return found


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """The nodes of ``function``'s body, not those of functions or classes nested in it."""
    found: list[ast.AST] = []
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def _has_value(node: ast.AST) -> bool:
    if isinstance(node, (ast.Yield, ast.YieldFrom)):
        return True
    if not isinstance(node, ast.Return) or node.value is None:
        return False
    return not (isinstance(node.value, ast.Constant) and node.value.value is None)


def passes(value: Any, *, assertion_style: bool) -> bool:
    """The verdict on a value the check returned."""
    if value is None and assertion_style:
        return True
    try:
        return bool(value)
    except Exception:  # an object whose truth value is undefined (e.g. a numpy array)
        return False


# -------------------------------------------------------------------- "not there yet" errors


def is_missing(exc: BaseException) -> bool:
    """A lookup that found nothing (yet): a missing key or index, or ``None`` used as
    an object (``None["x"]``, ``None.get``, ``"x" in None``)."""
    if isinstance(exc, LookupError):
        return True
    if isinstance(exc, (AttributeError, TypeError)):
        return str(exc).startswith(_NONE_MESSAGES)
    return False


def describe_missing(exc: BaseException, fn: Callable[..., Any]) -> str:
    """E.g. ``key 'phase' is missing (KeyError) in cluster.get(ref)["status"]["phase"]
    (test_widget.py:12)``."""
    if isinstance(exc, KeyError) and exc.args:
        what = f"key {exc.args[0]!r} is missing (KeyError)"
    elif isinstance(exc, IndexError):
        what = f"index out of range (IndexError: {exc})"
    elif isinstance(exc, LookupError):
        what = f"{type(exc).__name__}: {exc}"
    else:
        what = f"a value is None ({type(exc).__name__}: {exc})"
    where = _failing_expression(exc, fn)
    return what + (f" in {where}" if where else "")


def _failing_expression(exc: BaseException, fn: Callable[..., Any]) -> str:
    """The source of the expression that raised, in the check's own frame if the
    error passed through it (else the innermost frame), with file:line."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    code = check_code(fn)
    own = [frame for frame in frames
           if code is not None and (frame.filename, frame.name) == (code.co_filename, code.co_name)]
    chosen = own[-1] if own else frames[-1]
    line = linecache.getline(chosen.filename, chosen.lineno or 0)
    text = line.strip()
    start, end = getattr(chosen, "colno", None), getattr(chosen, "end_colno", None)
    same_line = getattr(chosen, "end_lineno", chosen.lineno) == chosen.lineno
    if line and start is not None and end is not None and same_line and end > start:
        text = line.encode("utf-8")[start:end].decode("utf-8", "replace").strip()
    if len(text) > 120:
        text = text[:117] + "..."
    place = f"{chosen.filename.rsplit('/', 1)[-1]}:{chosen.lineno}"
    return f"`{text}` ({place})" if text else f"({place})"
