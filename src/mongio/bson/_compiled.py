"""Where the codec (and a connection's round trip) find their compiled code: the optional C extensions
``mongio.bson._speedups`` and ``mongio.connection._speedups``, unless they were not built or the environment
sets ``MONGIO_NO_SPEEDUPS``."""

from __future__ import annotations

import importlib
import os
from typing import Any


def load_speedups(module: str = "mongio.bson._speedups") -> Any:
    """The extension ``module``, or None when it is absent or switched off."""
    if os.environ.get("MONGIO_NO_SPEEDUPS"):
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
