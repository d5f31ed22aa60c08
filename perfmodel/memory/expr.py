"""Safe integer index expressions: arithmetic, comparisons and named indices only.

"ty*33 + tx", "threadIdx.x + blockIdx.x*blockDim.x", "(row < M) and (k < K)" are parsed with
Python's ast module and evaluated on numpy arrays; nothing is ever passed to eval().
Division is C's integer division on non-negative operands.
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import AccessError

_CUDA_BUILTINS = {
    ("threadIdx", "x"): "tx", ("threadIdx", "y"): "ty", ("threadIdx", "z"): "tz",
    ("blockIdx", "x"): "bx", ("blockIdx", "y"): "by", ("blockIdx", "z"): "bz",
    ("blockDim", "x"): "bdx", ("blockDim", "y"): "bdy", ("blockDim", "z"): "bdz",
    ("gridDim", "x"): "gdx", ("gridDim", "y"): "gdy", ("gridDim", "z"): "gdz",
}
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCS = {"min": np.minimum, "max": np.maximum}


def _c_to_python(text: str) -> str:
    return text.replace("&&", " and ").replace("||", " or ").replace("!=", "\0").replace(
        "!", " not ").replace("\0", "!=")


@dataclass(frozen=True)
class Expr:
    """A parsed index expression; `names` are the free variables it reads."""

    text: str

    @cached_property
    def tree(self) -> ast.expr:
        source = _c_to_python(self.text)
        try:
            tree = ast.parse(source.strip(), mode="eval").body
        except SyntaxError as exc:
            col = (exc.offset or 1) - 1
            raise AccessError(self._point(col, f"cannot parse index expression: {exc.msg}")) from None
        self._validate(tree)
        return tree

    @cached_property
    def names(self) -> frozenset[str]:
        found: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                found.add(_CUDA_BUILTINS[(node.value.id, node.attr)])
            elif isinstance(node, ast.Name) and node.id not in {"threadIdx", "blockIdx", "blockDim",
                                                                  "gridDim", *_FUNCS}:
                found.add(node.id)
        return frozenset(found)

    def _point(self, col: int, msg: str) -> str:
        return f"{msg}\n  {self.text}\n  {' ' * max(col, 0)}^"

    def _validate(self, node: ast.AST) -> None:
        ok = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
              ast.Name, ast.Load, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or, *_BINOPS, *_CMPOPS)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, int) and not isinstance(sub.value, bool):
                continue
            if isinstance(sub, ast.Attribute):
                if not (isinstance(sub.value, ast.Name) and (sub.value.id, sub.attr) in _CUDA_BUILTINS):
                    raise AccessError(self._point(sub.col_offset, "only threadIdx/blockIdx/blockDim/"
                                                                  "gridDim .x/.y/.z may be used"))
                continue
            if isinstance(sub, ast.Call):
                if not (isinstance(sub.func, ast.Name) and sub.func.id in _FUNCS and not sub.keywords):
                    raise AccessError(self._point(sub.col_offset, "only min() and max() may be called"))
                continue
            if isinstance(sub, (ok, ast.Name)):
                continue
            raise AccessError(self._point(getattr(sub, "col_offset", 0),
                                          f"{type(sub).__name__} is not allowed in an index expression "
                                          "(integers, + - * / % << >> & | ^, comparisons, and/or, "
                                          "min/max and named indices only)"))

    def evaluate(self, env: Mapping[str, Any]) -> np.ndarray:
        missing = sorted(self.names - set(env))
        if missing:
            raise AccessError(f"index expression {self.text!r} uses undefined name(s) "
                              f"{', '.join(missing)}; defined: {', '.join(sorted(env))}")
        return np.asarray(self._compiled(env))

    @cached_property
    def _compiled(self) -> Callable[[Mapping[str, Any]], Any]:
        return _compile(self.tree)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_compiled"}  # closures do not pickle


def _compile(node: ast.AST) -> Callable[[Mapping[str, Any]], Any]:
    """A validated tree as nested closures (walked once, not at every evaluation)."""
    if isinstance(node, ast.Constant):
        value = node.value
        return lambda env: value
    if isinstance(node, (ast.Name, ast.Attribute)):
        key = node.id if isinstance(node, ast.Name) else _CUDA_BUILTINS[(node.value.id, node.attr)]  # type: ignore[union-attr]
        return lambda env: env[key]
    if isinstance(node, ast.BinOp):
        op, left, right = _BINOPS[type(node.op)], _compile(node.left), _compile(node.right)
        return lambda env: op(left(env), right(env))
    if isinstance(node, ast.UnaryOp):
        operand = _compile(node.operand)
        if isinstance(node.op, ast.Not):
            return lambda env: np.logical_not(operand(env))
        return (lambda env: -operand(env)) if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Compare):
        first = _compile(node.left)
        chain = [(_CMPOPS[type(op)], _compile(c)) for op, c in zip(node.ops, node.comparators, strict=True)]

        def compare(env: Mapping[str, Any]) -> Any:
            left, out = first(env), True
            for op, comp in chain:
                right = comp(env)
                out = np.logical_and(out, op(left, right))
                left = right
            return out
        return compare
    if isinstance(node, ast.BoolOp):
        values = [_compile(v) for v in node.values]
        join = np.logical_and if isinstance(node.op, ast.And) else np.logical_or

        def boolean(env: Mapping[str, Any]) -> Any:
            out = values[0](env)
            for v in values[1:]:
                out = join(out, v(env))
            return out
        return boolean
    if isinstance(node, ast.IfExp):
        test, body, orelse = _compile(node.test), _compile(node.body), _compile(node.orelse)
        return lambda env: np.where(test(env), body(env), orelse(env))
    if isinstance(node, ast.Call):
        fn, args = _FUNCS[node.func.id], [_compile(a) for a in node.args]  # type: ignore[union-attr]
        return lambda env: fn(*(a(env) for a in args))
    raise AccessError(f"cannot evaluate {ast.dump(node)}")  # unreachable after _validate


def parse(text: str) -> Expr:
    """Parse and check an expression now (errors point at the offending token)."""
    e = Expr(text)
    _ = e.tree
    return e


def inlined(text: str, defs: Mapping[str, str]) -> Expr:
    """`text` with `defs` inlined (substitute), parsed; kept, as each launch of a kernel binds the same
    few expressions again."""
    return _inlined(text, tuple(defs.items()))


@functools.lru_cache(maxsize=4096)
def _inlined(text: str, defs: tuple[tuple[str, str], ...]) -> Expr:
    return parse(substitute(text, dict(defs)))


def substitute(text: str, defs: Mapping[str, str]) -> str:
    """Inline `defs` (name -> expression) into text, innermost last, parenthesised."""
    for expr in (text, *defs.values()):
        parse(expr)  # malformed or disallowed text fails here, pointing at the token
    if not defs:
        return text
    tree = ast.parse(_c_to_python(text).strip(), mode="eval")
    parsed = {k: ast.parse(_c_to_python(v).strip(), mode="eval").body for k, v in defs.items()}

    class Inline(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in parsed:
                return self.visit(parsed[node.id])
            return node

    for _ in range(8):  # definitions may refer to earlier ones
        tree = Inline().visit(tree)
    return ast.unparse(tree)
