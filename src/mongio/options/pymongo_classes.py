"""Whether a value is one of PyMongo's option objects (``WriteConcern``, ``ReadConcern``, the read preference
modes), which mongio's compare equal to, both ways. PyMongo is never imported here: an object of one of its
classes exists only once the class's module was imported, so a module not loaded answers False. Kept apart
from :mod:`mongio.pymongo_types` (the one module that imports PyMongo), which a client imports only for the
PyMongo-typed mode.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["is_pymongo_read_concern", "is_pymongo_read_preference", "is_pymongo_write_concern"]


def _is_instance_of_loaded(value: Any, module_name: str, class_name: str) -> bool:
    """Whether ``value`` is an instance of PyMongo's ``module_name.class_name``, without importing PyMongo: an
    object of PyMongo's exists only once its module was imported, so an unloaded module answers False."""
    module = sys.modules.get(module_name)
    if module is None:
        return False
    cls = vars(module).get(class_name)
    return isinstance(cls, type) and isinstance(value, cls)


def is_pymongo_write_concern(value: Any) -> bool:
    """Whether ``value`` is PyMongo's ``WriteConcern`` (which mongio's compares equal to, both ways)."""
    return _is_instance_of_loaded(value, "pymongo.write_concern", "WriteConcern")


def is_pymongo_read_concern(value: Any) -> bool:
    """Whether ``value`` is PyMongo's ``ReadConcern`` (which mongio's compares equal to, both ways)."""
    return _is_instance_of_loaded(value, "pymongo.read_concern", "ReadConcern")


def is_pymongo_read_preference(value: Any) -> bool:
    """Whether ``value`` is one of PyMongo's read preference modes (which mongio's compare equal to, both
    ways)."""
    return _is_instance_of_loaded(value, "pymongo.read_preferences", "_ServerMode")
