"""Derived-metric formulas: a small, safe evaluator for the METRICS lines of event-set files.

A formula is an arithmetic expression over counter names (LIKWID-group style):
`CAS_COUNT_READ * 64 / time`, `1 - CPU_CLK_UNHALTED_REF / TSC`, `max(a, b) / (c + d)`.
Allowed: numbers (int, float, 1e9), names, `+ - * /`, unary minus/plus, parentheses, `min(...)` and `max(...)`
with one or more arguments. Nothing else (no attribute access, calls, subscripts, comparisons, `**`) is
accepted: the expression is parsed with `ast` and every node is checked before anything is evaluated.

Names are Python identifiers; event names with dots or colons (`CAS_COUNT.READS`,
`uncore_imc/cas_count_read/`)
are written with `_` in formulas and matched through `formula_name(event)`, or the caller passes values under
the identifier spelling. Division by zero gives NaN (a metric over an interval with no cycles is undefined,
not an error); a name without a value is an error naming the name.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from tailscope.errors import InputError

__all__ = ["FormulaError", "check_formula", "evaluate", "formula_name", "names_in"]

_FUNCTIONS = {"min": min, "max": max}
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")
_MAX_LENGTH = 4096


class FormulaError(InputError, ValueError):
    """A formula that is not allowed, does not parse, or names a counter without a value."""


def formula_name(event: str) -> str:
    """The identifier a formula uses for an event name: every character outside [A-Za-z0-9_] becomes `_`."""
    name = _NOT_NAME.sub("_", event)
    return f"_{name}" if name[:1].isdigit() else name


@lru_cache(maxsize=512)
def _parse(formula: str) -> ast.Expression:
    if len(formula) > _MAX_LENGTH:
        raise FormulaError(f"formula longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(formula.strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"formula {formula!r} does not parse ({exc.msg})") from None
    for node in ast.walk(tree):
        _check_node(node, formula)
    return tree


def _check_node(node: ast.AST, formula: str) -> None:
    if isinstance(node, ast.Expression | ast.Load | ast.Name):
        return
    if isinstance(node, ast.operator | ast.unaryop):
        if not isinstance(node, ast.Add | ast.Sub | ast.Mult | ast.Div | ast.USub | ast.UAdd):
            raise FormulaError(
                f"formula {formula!r}: operator {type(node).__name__} is not allowed (+ - * /)"
            )
        return
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise FormulaError(f"formula {formula!r}: constant {node.value!r} is not a number")
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise FormulaError(f"formula {formula!r}: only min(...) and max(...) may be called")
        if node.keywords or not node.args or any(isinstance(a, ast.Starred) for a in node.args):
            raise FormulaError(f"formula {formula!r}: {node.func.id}() takes one or more plain arguments")
        return
    raise FormulaError(f"formula {formula!r}: {type(node).__name__} is not allowed")


def names_in(formula: str) -> set[str]:
    """The counter names a formula uses (min and max excluded)."""
    tree = _parse(formula)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def check_formula(formula: str, names: Iterable[str]) -> None:
    """Raise FormulaError unless `formula` is allowed and uses only `names` (event names or identifiers)."""
    known = {formula_name(n) for n in names} | set(names)
    unknown = sorted(names_in(formula) - known)
    if unknown:
        raise FormulaError(f"formula {formula!r}: unknown name(s) {', '.join(unknown)}")


def evaluate(formula: str, values: Mapping[str, float]) -> float:
    """The formula's value; `values` maps event names or their identifier spelling to numbers."""
    tree = _parse(formula)
    lookup = {formula_name(k): float(v) for k, v in values.items()}
    lookup.update({k: float(v) for k, v in values.items() if k.isidentifier()})
    return _eval(tree.body, lookup, formula)


def _eval(node: ast.AST, values: Mapping[str, float], formula: str) -> float:
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        try:
            return values[node.id]
        except KeyError:
            raise FormulaError(f"formula {formula!r}: no value for {node.id}") from None
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, values, formula)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, values, formula)
        right = _eval(node.right, values, formula)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0.0 or math.isnan(right):
            return math.nan
        return left / right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [_eval(a, values, formula) for a in node.args]
        return float(_FUNCTIONS[node.func.id](args))
    raise FormulaError(f"formula {formula!r}: {type(node).__name__} is not allowed")  # unreachable: checked
