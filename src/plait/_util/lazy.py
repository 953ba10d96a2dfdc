"""`lazy_exports`: a package's names imported from their modules on first use."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, sources: Mapping[str, str]) -> Callable[[str], Any]:
    """Return the module `__getattr__` of `package` that imports each name of `sources`
    from the module it maps to on first use, and keeps it in the package for later uses.

    Any other name raises `AttributeError`, as a missing module attribute does.
    """

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
