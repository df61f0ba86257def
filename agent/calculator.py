"""Safe arithmetic: the expression is parsed with `ast` and only whitelisted nodes are walked.

Nothing is ever passed to eval. Sizes are bounded so that `9**9**9` or a huge factor chain
cannot pin the CPU or exhaust memory.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

MAX_LENGTH = 500
MAX_NODES = 200
MAX_EXPONENT = 10_000
MAX_INT_BITS = 4_096  # ~1233 decimal digits

Number = int | float


class CalculatorError(Exception):
    """The expression is not allowed or has no value; the message says why."""


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


def evaluate(expression: str) -> str:
    """The value of `expression`, formatted; raises CalculatorError."""
    if len(expression) > MAX_LENGTH:
        raise CalculatorError(f"Expression too long (at most {MAX_LENGTH} characters).")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise CalculatorError("That is not a valid arithmetic expression.") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculatorError("Expression too complex.")
    try:
        value = _eval(tree.body)
    except ZeroDivisionError:
        raise CalculatorError("Division by zero.") from None
    except OverflowError:
        raise CalculatorError("The result is too large.") from None
    except (ValueError, TypeError) as exc:
        raise CalculatorError(f"Math error: {exc}.") from None
    return _format(value)


def _format(value: Number) -> str:
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return f"{value:.15g}"
    return str(value)


def _check_size(value: Any) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalculatorError("The result is not a real number.")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError("The result is too large.")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("The result is not a finite number.")
    return value


def _eval(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculatorError("Only numbers are allowed.")
        return _check_size(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check_size(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        if _int_product_too_big(node.op, left, right):
            raise CalculatorError("The result is too large.")
        return _check_size(_BINARY[type(node.op)](left, right))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        args = [_eval(arg) for arg in node.args]
        return _check_size(_FUNCTIONS[node.func.id](*args))
    raise CalculatorError(f"{type(node).__name__} is not allowed in an arithmetic expression.")


def _check_power(base: Number, exponent: Number) -> None:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"Exponents are limited to ±{MAX_EXPONENT}.")
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0:
        return
    if abs(base) > 1 and abs(base).bit_length() * exponent > MAX_INT_BITS * 2:
        raise CalculatorError("The result is too large.")


def _int_product_too_big(op: ast.operator, left: Number, right: Number) -> bool:
    if not (isinstance(op, ast.Mult) and isinstance(left, int) and isinstance(right, int)):
        return False
    return left.bit_length() + right.bit_length() > MAX_INT_BITS + 1
