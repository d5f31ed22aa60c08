"""Memory-access analysis: coalescing (global) and bank conflicts (shared), from addresses
or from index expressions of thread, block and loop indices."""

from .banks import SharedAccess, shared_access
from .coalescing import GlobalAccess, global_access
from .expr import Expr, parse
from .pattern import Access, AccessCount, Launch, addresses, analyse

__all__ = ["Access", "AccessCount", "Expr", "GlobalAccess", "Launch", "SharedAccess", "addresses",
           "analyse", "global_access", "parse", "shared_access"]
