"""Compares PyMongo's public async API and ``bson`` with mongio's counterparts, member by member.

For each PyMongo class in the modules of :data:`MODULES`, the class of the same name in mongio's module
(reached through mongio's PyMongo-named paths) must have every public member PyMongo's has, of the same
kind (coroutine function, plain method, async generator, property, class or static method, other
attribute), and each method must take the same parameters: same names in the same order, same kinds
(positional, keyword-only, ``*args``, ``**kwargs``) and the same defaults. A difference is named by a key
``Class.member: what`` (``what`` is ``missing``, ``kind``, ``signature``, or ``addition`` for a public member
only mongio's class has; the constructor is the member ``__init__``); tests/unit/compat/test_api_parity.py
checks the keys against those declared in ``src/mongio/compat/differences.yaml``.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import types
from collections.abc import Iterator
from typing import Any

from tests.docs.public_api import package_internal

# PyMongo module -> mongio module holding the same public classes.
MODULES = {
    "pymongo.asynchronous.mongo_client": "mongio.asynchronous.mongo_client",
    "pymongo.asynchronous.database": "mongio.asynchronous.database",
    "pymongo.asynchronous.collection": "mongio.asynchronous.collection",
    "pymongo.asynchronous.cursor": "mongio.asynchronous.cursor",
    "pymongo.asynchronous.command_cursor": "mongio.asynchronous.command_cursor",
    "pymongo.asynchronous.change_stream": "mongio.asynchronous.change_stream",
    "pymongo.asynchronous.client_session": "mongio.asynchronous.client_session",
    "gridfs.asynchronous.grid_file": "mongio.gridfs",
    "gridfs.errors": "mongio.gridfs.errors",
    "pymongo.results": "mongio.results",
    "pymongo.operations": "mongio.operations",
    "pymongo.errors": "mongio.errors",
    "pymongo.read_concern": "mongio.read_concern",
    "pymongo.write_concern": "mongio.write_concern",
    "pymongo.read_preferences": "mongio.read_preferences",
    "pymongo.collation": "mongio.collation",
    "bson": "mongio.bson",
}

# Classes a PyMongo module holds that are not its API (imported helpers, typing aliases, internals); the
# module-level names themselves are checked by test_pymongo_surface.py and test_bson_names.py.
NOT_API = {
    "pymongo.read_preferences": {"MovingAverage"},
    "bson": {"EncodedDocument"},
}

# PyMongo module -> mongio module whose public functions are compared the same way (key ``module.function``).
FUNCTION_MODULES = {
    "bson": "mongio.bson",
    "bson.json_util": "mongio.bson.json_util",
    "pymongo.asynchronous.uri_parser": "mongio.asynchronous.uri_parser",
}

# Functions a PyMongo module holds that are not its API (typing helpers, internals it exports).
NOT_API_FUNCTIONS = {
    "bson": {"gen_list_name", "get_data_and_view"},
    "bson.json_util": {"cast", "get_size"},
}

_PLAIN_DEFAULTS = {type(None), bool, int, float, str, bytes, tuple, frozenset}


def _public_classes(module: types.ModuleType) -> list[str]:
    """The classes a module offers: those in ``__all__`` when declared, else those defined in it."""
    declared = getattr(module, "__all__", None)
    names = list(declared) if declared is not None else [n for n in vars(module) if not n.startswith("_")]
    found = []
    for name in names:
        value = getattr(module, name, None)
        if not isinstance(value, type) or name.startswith("_"):
            continue
        if declared is None and value.__module__ != module.__name__:
            continue  # imported from elsewhere: compared where it is defined
        found.append(name)
    return sorted(set(found) - NOT_API.get(module.__name__, set()))


def class_pairs() -> Iterator[tuple[str, type, Any]]:
    """(label, PyMongo class, mongio's class of that name or None) for every class compared."""
    seen: set[type] = set()
    for theirs_name, ours_name in MODULES.items():
        theirs = importlib.import_module(theirs_name)
        ours = importlib.import_module(ours_name)
        for name in _public_classes(theirs):
            cls = getattr(theirs, name)
            if cls in seen:
                continue
            seen.add(cls)
            yield f"{theirs_name}.{name}", cls, getattr(ours, name, None)


def _static(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return getattr(cls, name)


def member_kind(cls: type, name: str) -> str:
    """What a class member is, in the words the differences list uses."""
    raw = _static(cls, name)
    if isinstance(raw, staticmethod | classmethod):
        function = raw.__func__
        prefix = "staticmethod" if isinstance(raw, staticmethod) else "classmethod"
        return f"{prefix} coroutine" if inspect.iscoroutinefunction(function) else prefix
    if isinstance(raw, property | types.GetSetDescriptorType | types.MemberDescriptorType):
        return "property"
    if inspect.isdatadescriptor(raw) or (hasattr(raw, "__set_name__") and hasattr(raw, "__get__")):
        return "property"  # namedtuple fields, functools.cached_property and similar descriptors
    if inspect.isclass(raw):
        return "class"
    if inspect.iscoroutinefunction(raw):
        return "coroutine"
    if inspect.isasyncgenfunction(raw):
        return "async generator"
    if inspect.isfunction(raw) or inspect.ismethoddescriptor(raw) or isinstance(raw, types.BuiltinFunctionType):
        return "method"
    return "attribute"


def _default(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"={int(value)!r}"  # an IntEnum member and its int are the same argument
    if isinstance(value, enum.Enum):
        return f"={type(value).__name__}.{value.name}"
    if type(value) in _PLAIN_DEFAULTS:
        return f"={value!r}"
    return f"=<{type(value).__name__}>"


def signature_text(cls: type, name: str) -> str | None:
    """The parameters of a method as ``(a, b=1, *, c=None, **kwargs)``, without ``self``/``cls``; None
    when Python cannot tell them (a C slot wrapper)."""
    raw = _static(cls, name)
    function = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    parameters = list(signature.parameters.values())
    if not isinstance(raw, staticmethod) and parameters and parameters[0].name in {"self", "cls"}:
        parameters = parameters[1:]
    parts: list[str] = []
    star_done = False
    for parameter in parameters:
        if parameter.kind is parameter.VAR_POSITIONAL:
            parts.append(f"*{parameter.name}")
            star_done = True
        elif parameter.kind is parameter.VAR_KEYWORD:
            parts.append(f"**{parameter.name}")
        elif parameter.kind is parameter.KEYWORD_ONLY and not star_done:
            parts.extend(["*", f"{parameter.name}{_default(parameter.default)}"])
            star_done = True
        elif parameter.kind is parameter.POSITIONAL_ONLY:
            parts.append(f"{parameter.name}{_default(parameter.default)}/")
        else:
            parts.append(f"{parameter.name}{_default(parameter.default)}")
    return "(" + ", ".join(parts) + ")"


def public_members(cls: type) -> list[str]:
    """The members a ported program may use: public names and the constructor."""
    names = [name for name in dir(cls) if not name.startswith("_")]
    if "__init__" in vars(cls) or any("__init__" in vars(base) for base in cls.__mro__[1:-1]):
        names.append("__init__")
    return sorted(names)


def compare(short: str, theirs: type, ours: type) -> dict[str, str]:
    """The differences between PyMongo's class ``theirs`` and mongio's ``ours``, keys prefixed ``short``."""
    found: dict[str, str] = {}
    for name in public_members(theirs):
        key = f"{short}.{name}"
        if not hasattr(ours, name):
            found[f"{key}: missing"] = "not in mongio"
            continue
        kinds = member_kind(theirs, name), member_kind(ours, name)
        if kinds[0] != kinds[1]:
            found[f"{key}: kind"] = f"PyMongo {kinds[0]}, mongio {kinds[1]}"
            continue
        if kinds[0] in {"property", "attribute", "class"}:
            continue
        signatures = signature_text(theirs, name), signature_text(ours, name)
        if None not in signatures and signatures[0] != signatures[1]:
            found[f"{key}: signature"] = f"PyMongo {signatures[0]}, mongio {signatures[1]}"
    internal = package_internal(ours)
    for name in dir(ours):
        if not name.startswith("_") and not hasattr(theirs, name) and name not in internal:
            found[f"{short}.{name}: addition"] = f"only in mongio ({member_kind(ours, name)})"
    return found


def _public_functions(module: types.ModuleType) -> list[str]:
    declared = getattr(module, "__all__", None)
    names = list(declared) if declared is not None else [n for n in vars(module) if not n.startswith("_")]
    found = []
    for name in names:
        value = getattr(module, name, None)
        if not isinstance(value, types.FunctionType) or name.startswith("_"):
            continue
        if declared is None and value.__module__ != module.__name__:
            continue
        found.append(name)
    return sorted(set(found) - NOT_API_FUNCTIONS.get(module.__name__, set()))


def function_pairs() -> Iterator[tuple[str, Any, Any]]:
    """(label, PyMongo function, mongio's function of that name or None) for every function compared."""
    for theirs_name, ours_name in FUNCTION_MODULES.items():
        theirs = importlib.import_module(theirs_name)
        ours = importlib.import_module(ours_name)
        for name in _public_functions(theirs):
            yield f"{theirs_name}.{name}", getattr(theirs, name), getattr(ours, name, None)


def _function_kind(function: Any) -> str:
    if inspect.iscoroutinefunction(function):
        return "coroutine"
    return "function" if callable(function) else "attribute"


def _function_signature(function: Any) -> str | None:
    holder = type("Holder", (), {"f": staticmethod(function)})
    return signature_text(holder, "f")


def compare_functions() -> dict[str, str]:
    """The differences between PyMongo's module-level functions of :data:`FUNCTION_MODULES` and mongio's."""
    found: dict[str, str] = {}
    for label, theirs, ours in function_pairs():
        if ours is None:
            found[f"{label}: missing"] = "not in mongio"
            continue
        kinds = _function_kind(theirs), _function_kind(ours)
        if kinds[0] != kinds[1]:
            found[f"{label}: kind"] = f"PyMongo {kinds[0]}, mongio {kinds[1]}"
            continue
        signatures = _function_signature(theirs), _function_signature(ours)
        if None not in signatures and signatures[0] != signatures[1]:
            found[f"{label}: signature"] = f"PyMongo {signatures[0]}, mongio {signatures[1]}"
    return found


def differences() -> dict[str, str]:
    """Every difference found: key -> what PyMongo has and what mongio has."""
    found: dict[str, str] = {}
    for label, theirs, ours in class_pairs():
        short = label if label.startswith("bson.") else label.rsplit(".", 1)[1]
        if ours is None:
            found[f"{short}: missing"] = f"{label} has no mongio class of that name"
        else:
            found.update(compare(short, theirs, ours))
    found.update(compare_functions())
    return found
