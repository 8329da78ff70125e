"""Every public class, function, method and property has a docstring: the API reference is rendered from them,
and one without a docstring would be missing from it."""

from __future__ import annotations

import inspect

from tests.docs import public_api


def test_every_public_module_has_a_docstring() -> None:
    missing = [name for name in public_api.PUBLIC_MODULES if not inspect.getdoc(__import__(name, fromlist=["_"]))]
    assert not missing, f"public modules without a docstring: {missing}"


def test_every_public_class_and_function_has_a_docstring() -> None:
    objects = public_api.public_objects()
    assert "mongio.collection.Collection" in objects and "mongio.bson.json_util.dumps" in objects
    missing = [path for path, obj in objects.items() if not (obj.__doc__ or "").strip()]
    assert not missing, "public classes and functions without a docstring:\n  " + "\n  ".join(missing)


def test_every_public_method_and_property_has_a_docstring() -> None:
    missing = []
    for path, obj in public_api.public_objects().items():
        if not inspect.isclass(obj):
            continue
        for name, function in public_api.public_members(obj):
            if not (getattr(function, "__doc__", None) or "").strip():
                missing.append(f"{path}.{name}")
    assert not missing, "public methods and properties without a docstring:\n  " + "\n  ".join(missing)
