from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.calculator import CalculatorError, evaluate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", "7"),
        ("(1200 * 1.19) / 3", "476"),
        ("7 // 2", "3"),
        ("-7 % 3", "2"),
        ("2 ** 10", "1024"),
        ("2 ** -1", "0.5"),
        ("0.1 + 0.2", "0.3"),
        ("sqrt(16) + abs(-2)", "6"),
        ("round(pi, 3)", "3.142"),
        ("max(1, 5, 3) - min(4, 2)", "3"),
        ("10 ** 20", "100000000000000000000"),
        ("log(e)", "1"),
    ],
)
def test_arithmetic(expression: str, value: str) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('echo pwned')",
        "().__class__.__bases__[0].__subclasses__()",
        "open('/etc/passwd').read()",
        "eval('1+1')",
        "lambda: 1",
        "[x for x in range(10)]",
        "'a' * 10",
        "True + 1",
        "x",
        "1 if 1 else 2",
        "1 < 2",
        "sqrt(x=4)",
        "a.b",
        "1; 2",
        "",
    ],
)
def test_anything_but_arithmetic_is_refused(expression: str) -> None:
    with pytest.raises(CalculatorError):
        evaluate(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "9 ** 9 ** 9",
        "2 ** 100000",
        "10 ** 5000",
        "(10 ** 1000) ** 5",
        "1e308 * 10",
        "exp(1000)",
        "(2 ** 4000) * (2 ** 4000)",
        "1 / 0",
        "5 % 0",
        "(-8) ** 0.5",
        "log(0)",
        "1" * 600,
    ],
)
def test_bounded_work_and_math_errors(expression: str) -> None:
    started = time.perf_counter()
    with pytest.raises(CalculatorError):
        evaluate(expression)
    assert time.perf_counter() - started < 0.5


@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6), st.sampled_from("+-*"))
def test_matches_python_on_integers(a: int, b: int, op: str) -> None:
    expected = {"+": a + b, "-": a - b, "*": a * b}[op]
    assert evaluate(f"({a}) {op} ({b})") == str(expected)
