"""The public API the documentation covers: every module users import from, and what each exports."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from mongio.cursor_client import CURSOR_CLIENT_METHODS
from mongio.execution.executor import ClientLike
from mongio.sessions.operation_session import EXECUTOR_METHODS


def _declared_methods(protocol: type) -> frozenset[str]:
    """The public methods a Protocol declares."""
    return frozenset(name for name in vars(protocol) if not name.startswith("_"))


# Members of mongio's classes that are public within the package but not API: what the executor asks of a
# session (the methods OperationSession declares) and what the client asks of it when a cursor is dropped;
# what the executor asks of the client (ClientLike), what cursors and change streams ask of it
# (CursorClient) and its accessor of its executor; the error methods the driver labels errors with; the
# codec options' hook that makes the driver's ObjectIds; the bucket's index check shared with an upload;
# what a collection's find_one asks of a find cursor. The API
# pages leave them out (docs/_ext/internal_members.py), and so does the comparison with PyMongo. A class's
# entry covers its subclasses too (see package_internal).
PACKAGE_INTERNAL_MEMBERS: dict[str, frozenset[str]] = {
    "ClientSession": EXECUTOR_METHODS | {"abandon"},
    "MongoClient": frozenset({"executor"}) | CURSOR_CLIENT_METHODS | _declared_methods(ClientLike),
    "MongioError": frozenset(
        {"add_error_label", "remove_error_label", "attribute_to_service", "failed_service_id"}
    ),
    "CodecOptions": frozenset({"new_object_id"}),
    "GridIn": frozenset({"share_index_check"}),
    "Cursor": frozenset({"first_document", "kill_left_open"}),
}


def package_internal(cls: type) -> frozenset[str]:
    """The package-internal members of ``cls``: those declared for it or for a class it derives from."""
    return frozenset().union(
        *(PACKAGE_INTERNAL_MEMBERS.get(klass.__name__, frozenset()) for klass in cls.__mro__)
    )


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
    seen: set[str] = set(package_internal(cls))
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
