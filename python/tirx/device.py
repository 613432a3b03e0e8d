"""GPU calls (docs/python.md §5): placeholder until the native launch lands."""

from typing import Optional, Tuple


def compute_capability() -> Optional[Tuple[int, int]]:
    return None


def launch(kernel, args):
    raise TypeError("GPU launches are not available yet")
