"""Safe integer index expressions: arithmetic, comparisons and named indices only.

"ty*33 + tx", "threadIdx.x + blockIdx.x*blockDim.x", "(row < M) and (k < K)" are parsed with
Python's ast module and evaluated on numpy arrays; nothing is ever passed to eval().
Division is C's integer division on non-negative operands.
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Mapping
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
        return np.asarray(self._eval(self.tree, env))

    def _eval(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.Attribute):
            return env[_CUDA_BUILTINS[(node.value.id, node.attr)]]  # type: ignore[union-attr]
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](self._eval(node.left, env), self._eval(node.right, env))
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, env)
            return np.logical_not(v) if isinstance(node.op, ast.Not) else (-v if isinstance(node.op, ast.USub) else v)
        if isinstance(node, ast.Compare):
            left, out = self._eval(node.left, env), True
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self._eval(comp, env)
                out = np.logical_and(out, _CMPOPS[type(op)](left, right))
                left = right
            return out
        if isinstance(node, ast.BoolOp):
            vals = [self._eval(v, env) for v in node.values]
            fn = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
            out = vals[0]
            for v in vals[1:]:
                out = fn(out, v)
            return out
        if isinstance(node, ast.IfExp):
            return np.where(self._eval(node.test, env), self._eval(node.body, env),
                            self._eval(node.orelse, env))
        if isinstance(node, ast.Call):
            args = [self._eval(a, env) for a in node.args]
            return _FUNCS[node.func.id](*args)  # type: ignore[union-attr]
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
