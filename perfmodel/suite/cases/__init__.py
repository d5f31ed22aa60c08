"""Importing this package registers every kernel case."""

from . import matmul, membench, probes, stencil, transpose  # noqa: F401
