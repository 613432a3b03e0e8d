"""The Python front end: ``T``/``Tx`` namespaces and ``@T.prim_func`` (docs/python.md §2)."""

from . import T, Tx  # noqa: F401
