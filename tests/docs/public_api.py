"""The public API the documentation covers: every module users import from, and what each exports."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from mongio.sessions.operation_session import EXECUTOR_METHODS

# Members of mongio's classes that are public within the package but not API: what the executor asks of a
# session (the methods OperationSession declares) and the client's accessor of its executor. The API pages
# leave them out (docs/_ext/internal_members.py), and so does the comparison with PyMongo.
PACKAGE_INTERNAL_MEMBERS: dict[str, frozenset[str]] = {
    "ClientSession": EXECUTOR_METHODS,
    "MongoClient": frozenset({"executor"}),
}

PUBLIC_MODULES = (
    "mongio",
    "mongio.errors",
    "mongio.results",
    "mongio.monitoring",
    "mongio.read_preferences",
    "mongio.write_concern",
    "mongio.read_concern",
    "mongio.server_api",
    "mongio.collation",
    "mongio.driver_info",
    "mongio.change_stream",
    "mongio.uri_parser",
    "mongio.bson",
    "mongio.bson.json_util",
    "mongio.gridfs",
    "mongio.asynchronous.mongo_client",
    "mongio.asynchronous.database",
    "mongio.asynchronous.collection",
    "mongio.asynchronous.cursor",
    "mongio.asynchronous.command_cursor",
    "mongio.asynchronous.change_stream",
    "mongio.asynchronous.client_session",
    "mongio.asynchronous.bulk",
    "mongio.asynchronous.uri_parser",
)


def exports(module_name: str) -> Iterator[tuple[str, Any]]:
    """Each name of the module's ``__all__`` with its object."""
    module: ModuleType = importlib.import_module(module_name)
    for name in module.__all__:
        yield name, getattr(module, name)


def is_mongio_object(obj: Any) -> bool:
    """A class or function mongio defines (not a constant, a submodule or something re-exported from the
    standard library)."""
    return (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__.startswith("mongio")


def public_objects() -> dict[str, Any]:
    """Every class and function mongio exports, once each, by its defining path."""
    found: dict[str, Any] = {}
    for module_name in PUBLIC_MODULES:
        for _name, obj in exports(module_name):
            if is_mongio_object(obj):
                found.setdefault(f"{obj.__module__}.{obj.__qualname__}", obj)
    return found


def _function_of(member: Any) -> Any:
    if isinstance(member, property):
        return member.fget
    if isinstance(member, (staticmethod, classmethod)):
        return member.__func__
    return member


def public_members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties of a class, its mongio base classes' included (those of builtins
    and the standard library, such as ``Exception`` or ``enum``, are theirs to document)."""
    seen: set[str] = set(PACKAGE_INTERNAL_MEMBERS.get(cls.__name__, ()))
    for klass in cls.__mro__:
        if not klass.__module__.startswith("mongio"):
            continue
        for name, member in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            function = _function_of(member)
            if isinstance(member, property) or inspect.isfunction(function):
                yield name, function
