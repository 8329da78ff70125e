"""The documentation build's griffe extension turns the docstrings' reStructuredText into Markdown the site
renders: roles into cross-references or code, directives into admonitions, literal blocks into code."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.docs.site import ROOT


def _extension() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rst_roles", ROOT / "docs" / "_ext" / "rst_roles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _convert(text: str, in_class: str | None = None) -> str:
    import griffe

    function = griffe.Function("f", docstring=griffe.Docstring(text))
    if in_class is not None:
        module_name, class_name = in_class.rsplit(".", 1)
        griffe.Module(module_name).set_member(class_name, klass := griffe.Class(class_name))
        klass.set_member("f", function)
    _extension().RstRoles().on_instance(node=None, obj=function, agent=None)
    assert function.docstring is not None
    return function.docstring.value


def test_roles_become_cross_references_or_code() -> None:
    assert _convert("Raises :class:`~mongio.errors.ConfigurationError`.") == (
        'Raises <autoref identifier="mongio.errors.ConfigurationError" optional><code>ConfigurationError</code>'
        "</autoref>."
    )
    assert _convert("See :meth:`mongio.collection.Collection.find`.") == (
        'See <autoref identifier="mongio.collection.Collection.find" optional>'
        "<code>mongio.collection.Collection.find</code></autoref>."
    )
    assert _convert("Use :meth:`close` or :func:`find()`.") == "Use `close` or `find`."
    assert _convert("Use :meth:`close`.", in_class="mongio.client.MongoClient") == (
        'Use <autoref identifier="mongio.client.MongoClient.close" optional><code>close</code></autoref>.'
    )
    assert _convert("The cursor of :meth:`Collection.aggregate\n<mongio.collection.Collection.aggregate>`.") == (
        'The cursor of <autoref identifier="mongio.collection.Collection.aggregate" optional>'
        "<code>Collection.aggregate</code></autoref>."
    )


def test_directives_become_admonitions_and_literal_blocks_code() -> None:
    assert _convert("Old.\n\n.. deprecated::\n    Use ``b``.") == 'Old.\n\n!!! warning "Deprecated"\n    Use ``b``.'
    assert _convert("Usage::\n\n    await x\n\nDone.") == "Usage:\n\n    await x\n\nDone."
    assert _convert("A time: 10:30, no role.") == "A time: 10:30, no role."
