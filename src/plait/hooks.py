"""Hooks that act (`plait.Hooks`, `plait.ModelRequest`): the public face of
`plait.core.hooks`, where the seams and their chain live; it exports every name that
module exports."""

from plait.core.hooks import *  # noqa: F403 - the face exports exactly what the module does
from plait.core.hooks import __all__ as __all__
