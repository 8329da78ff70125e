"""Where the codec finds its compiled element loops: the optional C extension ``_speedups``, unless it was
not built or the environment sets ``MONGIO_NO_SPEEDUPS``."""

from __future__ import annotations

import os
from typing import Any


def load_speedups() -> Any:
    """The ``_speedups`` extension module, or None when it is absent or switched off."""
    if os.environ.get("MONGIO_NO_SPEEDUPS"):
        return None
    try:
        from mongio.bson import _speedups  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return None
    return _speedups
