"""What a check's last expression compared, captured during its real attempts.

A check whose last expression is a comparison (``==``, ``in``, ``is``, ``<``...), a boolean
combination (``and``, ``or``, ``not``) or a call is compiled once more from its own source,
with each operand wrapped in a recorder, the way pytest rewrites ``assert`` statements. The
rewritten function runs instead of the original, on the same closure cells and globals, so
every attempt records the values it really compared: nothing is evaluated again after the
deadline. Checks ktest cannot rewrite run unchanged, and :attr:`Instrumented.why_not` says why
when that is worth telling (no source, a builtin, two lambdas on one line).
"""

from __future__ import annotations
import __future__

import ast
import copy
import functools
import linecache
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ktest.wait import checks

_CAPTURE = "__ktest_capture__"
_OUTER = "__ktest_outer__"
_FUTURE_FLAGS = functools.reduce(
    lambda flags, name: flags | getattr(__future__, name).compiler_flag, __future__.all_feature_names, 0
)
_COMPARISON_SIGNS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}


@dataclass(frozen=True)
class Part:
    """One sub-expression of the last expression, and how it is shown.

    ``kind``: "compare" (``children`` are its operands, ``signs`` its operators), "and"/"or"
    (``children`` are the clauses), "not", "call" (``children`` are its arguments), or "value".
    ``index`` is where its value is recorded (absent: it was not evaluated).
    """

    kind: str
    index: int
    source: str
    children: tuple[Part, ...] = ()
    signs: tuple[str, ...] = ()
    constant: bool = False


@dataclass
class Capture:
    """The values recorded during the current attempt, by :attr:`Part.index`."""

    values: dict[int, Any] = field(default_factory=dict)

    def __call__(self, index: int, value: Any) -> Any:
        self.values[index] = value
        return value

    def take(self) -> dict[int, Any]:
        """The values of the attempt that just ended; the next starts empty."""
        taken, self.values = self.values, {}
        return taken


@dataclass
class Instrumented:
    """A check ready to run: ``call`` (rewritten, or the check itself), what it shows
    (``expression``: None when nothing) and, when it could not be rewritten, why."""

    call: Callable[..., Any]
    expression: Part | None = None
    capture: Capture | None = None
    why_not: str | None = None


@dataclass(frozen=True)
class _Rewrite:
    code: types.CodeType
    expression: Part


def instrument(fn: Callable[..., Any]) -> Instrumented:
    """``fn`` rewritten to record the operands of its last expression on every call.

    A wrapper that names the check it calls (``wrapped_check``) and can wrap another
    (``with_check(fn)``, e.g. the async assertions' "run on the event loop") has its check
    rewritten and wrapped again. Whatever goes wrong while rewriting leaves ``fn`` as it is."""
    try:
        return _instrument(fn)
    except Exception as error:  # a failure message's extra must never break the wait itself
        return Instrumented(fn, why_not=f"ktest could not rewrite it ({type(error).__name__}: {error})")


def _instrument(fn: Callable[..., Any]) -> Instrumented:
    inner, rewrap = getattr(fn, "wrapped_check", None), getattr(fn, "with_check", None)
    if callable(inner) and callable(rewrap):
        found = instrument(inner)
        return Instrumented(rewrap(found.call), found.expression, found.capture, found.why_not)
    if isinstance(fn, types.BuiltinFunctionType) or (
        isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.BuiltinFunctionType)
    ):
        return Instrumented(fn, why_not="the check is a builtin, which has no Python source")
    if not isinstance(fn, types.FunctionType):
        return Instrumented(fn)  # partials, methods, callable objects: shown as before
    code = fn.__code__
    if not linecache.getlines(code.co_filename):
        return Instrumented(fn, why_not=f"its source is not available (defined in {code.co_filename})")
    node = checks.lambda_node(code) if code.co_name == "<lambda>" else checks.function_node(code)
    if node is None:
        if code.co_name == "<lambda>" and len(checks.lambdas_on_line(code)) > 1:
            return Instrumented(fn, why_not=(
                f"line {code.co_firstlineno} of {code.co_filename} holds several lambdas and ktest "
                "cannot tell which one is the check (write it on a line of its own, or as a def)"
            ))
        return Instrumented(fn, why_not=f"its source could not be found in {code.co_filename}")
    rewrite = _rewritten(code)
    if rewrite is None:
        return Instrumented(fn)
    capture = Capture()
    cells = dict(zip(code.co_freevars, fn.__closure__ or (), strict=True))
    cells[_CAPTURE] = types.CellType(capture)
    if not set(rewrite.code.co_freevars) <= set(cells):
        return Instrumented(fn)
    call = types.FunctionType(
        rewrite.code, fn.__globals__, fn.__name__, fn.__defaults__,
        tuple(cells[name] for name in rewrite.code.co_freevars),
    )
    call.__kwdefaults__ = fn.__kwdefaults__
    call.__qualname__ = fn.__qualname__
    return Instrumented(call, rewrite.expression, capture)


@functools.lru_cache(maxsize=256)
def _rewritten(code: types.CodeType) -> _Rewrite | None:
    """``code`` compiled again with its last expression's operands recorded, if it has one
    worth showing and can be rewritten without changing what it does."""
    found = checks.lambda_node(code) if code.co_name == "<lambda>" else checks.function_node(code)
    if found is None:
        return None
    node = copy.deepcopy(found)  # the parsed file is shared: change a copy
    lines = linecache.getlines(code.co_filename)
    last = _last_expression(node)
    if last is None or not _worth_showing(last) or not _safe_to_recompile(node):
        return None
    root, expression = _Rewriter(lines).part(last)
    if isinstance(node, ast.Lambda):
        node.body = root
        inner: ast.stmt = ast.Return(value=node)
    else:
        node.body[-1] = ast.Return(value=root)
        node.decorator_list = []
        inner = node
    # The closure's names as parameters of an enclosing function: the rewritten code then
    # reads them as free variables, in the cells of the original.
    module = ast.parse(f"def {_OUTER}({', '.join((*code.co_freevars, _CAPTURE))}): pass")
    outer = module.body[0]
    if not isinstance(outer, ast.FunctionDef):
        return None
    outer.body = [ast.copy_location(inner, found)]
    ast.fix_missing_locations(ast.copy_location(outer, found))
    try:
        compiled = compile(module, code.co_filename, "exec",
                           flags=code.co_flags & _FUTURE_FLAGS, dont_inherit=True)
    except (SyntaxError, ValueError, TypeError):
        return None
    outer_code = _constant_code(compiled, _OUTER)
    new_code = _constant_code(outer_code, code.co_name) if outer_code is not None else None
    if new_code is None or not _same_shape(code, new_code):
        return None
    return _Rewrite(new_code, expression)


def _same_shape(original: types.CodeType, rewritten: types.CodeType) -> bool:
    """The rewritten code has the original's arguments, variables and names: the source found
    is the one the check was compiled from (not a file edited since it was imported)."""
    return (
        (rewritten.co_argcount, rewritten.co_kwonlyargcount, rewritten.co_varnames)
        == (original.co_argcount, original.co_kwonlyargcount, original.co_varnames)
        and set(rewritten.co_freevars) - {_CAPTURE} == set(original.co_freevars)
        and set(original.co_names) == set(rewritten.co_names)
    )


def _constant_code(code: types.CodeType, name: str) -> types.CodeType | None:
    return next((const for const in code.co_consts
                 if isinstance(const, types.CodeType) and const.co_name == name), None)


def _last_expression(node: ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    if isinstance(node, ast.Lambda):
        return node.body
    last = node.body[-1]
    return last.value if isinstance(last, ast.Return) and last.value is not None else None


def _worth_showing(node: ast.expr) -> bool:
    return isinstance(node, (ast.Compare, ast.BoolOp, ast.Call)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    )


def _safe_to_recompile(node: ast.AST) -> bool:
    """No assert (pytest rewrote those: its message stays), no generator, no name that a class
    body would have mangled (``self.__secret``)."""
    for child in ast.walk(node):
        if isinstance(child, (ast.Assert, ast.Yield, ast.YieldFrom)):
            return False
        name = getattr(child, "id", None) or getattr(child, "attr", None) or ""
        if name.startswith("__") and not name.endswith("__"):
            return False
    return True


def _literal(node: ast.expr) -> bool:
    """True for an expression that names nothing (``"x"``, ``{"a": 1}``): its value is its text."""
    return not any(isinstance(child, (ast.Name, ast.Await)) for child in ast.walk(node))


class _Rewriter:
    """Wraps sub-expressions in ``__ktest_capture__(index, expression)``."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.count = 0

    def text(self, node: ast.expr) -> str:
        segment = checks.source_segment(self.lines, node) or ast.unparse(node)
        return " ".join(segment.split()) if "\n" in segment else segment

    def record(self, node: ast.expr) -> ast.expr:
        index = self.count
        self.count += 1
        wrapped = ast.Call(func=ast.Name(id=_CAPTURE, ctx=ast.Load()),
                           args=[ast.Constant(value=index), node], keywords=[])
        return ast.copy_location(wrapped, node)

    def rewrite(self, node: ast.expr) -> tuple[ast.expr, Part]:
        """``node`` with its parts recorded (not itself), and how it is shown; the Part's
        index is the one its parent records it under (set by ``part``)."""
        source = self.text(node)
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            parts = [self.leaf(operand) for operand in operands]
            node.left, *node.comparators = (recorded for recorded, _ in parts)
            signs = tuple(_COMPARISON_SIGNS[type(op)] for op in node.ops)
            return node, Part("compare", -1, source, tuple(part for _, part in parts), signs)
        if isinstance(node, ast.BoolOp):
            clauses = [self.part(value) for value in node.values]
            node.values = [recorded for recorded, _ in clauses]
            kind = "and" if isinstance(node.op, ast.And) else "or"
            return node, Part(kind, -1, source, tuple(part for _, part in clauses))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            recorded, inner = self.part(node.operand)
            node.operand = recorded
            return node, Part("not", -1, source, (inner,))
        if isinstance(node, ast.Call):
            arguments: list[Part] = []
            node.args = [self.argument(arg, arguments) for arg in node.args]
            for keyword in node.keywords:
                if keyword.arg is not None:
                    keyword.value = self.argument(keyword.value, arguments)
            return node, Part("call", -1, source, tuple(arguments))
        return node, Part("value", -1, source, constant=_literal(node))

    def part(self, node: ast.expr) -> tuple[ast.expr, Part]:
        """``node`` rewritten and recorded as a whole."""
        rewritten, shown = self.rewrite(node)
        recorded = self.record(rewritten)
        return recorded, Part(shown.kind, self.count - 1, shown.source, shown.children, shown.signs,
                              shown.constant)

    def leaf(self, node: ast.expr) -> tuple[ast.expr, Part]:
        """``node`` recorded as a whole, its own parts not shown."""
        source = self.text(node)
        recorded = self.record(node)
        return recorded, Part("value", self.count - 1, source, constant=_literal(node))

    def argument(self, node: ast.expr, shown: list[Part]) -> ast.expr:
        if isinstance(node, (ast.Starred, ast.GeneratorExp, ast.Lambda)) or _literal(node):
            return node  # nothing worth a line: a literal, or a value that is not the argument
        recorded, part = self.leaf(node)
        shown.append(part)
        return recorded
