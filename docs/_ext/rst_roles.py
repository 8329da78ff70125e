"""A griffe extension for the documentation build: docstrings use reStructuredText roles
(:class:`~mongio.errors.ConfigurationError`, :meth:`find`) and literal blocks (``Usage::``), which Markdown
would show literally. Each role becomes a cross-reference when it names a documented object (a bare name is
looked up in the docstring's class or module), and inline code otherwise; a literal block's ``::`` becomes ``:`` before the indented code Markdown already shows as code;
``.. deprecated::`` and ``.. note::`` directives become admonitions."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import griffe

# "text::" before an indented block is reStructuredText's literal block; Markdown shows the indented block as
# code already, so only the second colon goes.
LITERAL_BLOCK = re.compile(r"(\S)::\n\n")
# A directive such as ".. deprecated::" with its indented body becomes an admonition with the same body.
DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\. (?P<name>deprecated|note|warning|seealso)::[ \t]*(?P<rest>.*)$", re.M)
ADMONITIONS = {"deprecated": 'warning "Deprecated"', "note": "note", "warning": "warning", "seealso": 'info "See also"'}


ROLE = re.compile(
    r":(?:py:)?(?:class|meth|func|attr|exc|mod|data|obj|const):`(~?)(?:([^`<]*?)\s*<([^`>]+)>|([^`<>]+?))(?:\(\))?`"
)


def _admonition(match: re.Match[str]) -> str:
    indent, rest = match.group("indent"), match.group("rest").strip()
    head = f"{indent}!!! {ADMONITIONS[match.group('name')]}"
    return f"{head}\n{indent}    {rest}" if rest else head


def _scope(obj: griffe.Object) -> str | None:
    """Where a bare name in the object's docstring is looked up: the class it belongs to (or is), else its
    module."""
    if obj.is_class or obj.is_module:
        return obj.path
    parent = obj.parent
    return parent.path if parent is not None else None


def _role_replacer(scope: str | None) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        short, explicit_title, explicit_target, bare = match.groups()
        target = (explicit_target or bare).strip().lstrip(".")
        title = " ".join(explicit_title.split()) if explicit_title else target
        if short and not explicit_title:
            title = target.rsplit(".", 1)[-1]
        if "." not in target:
            if scope is None:
                return f"`{title}`"
            target = f"{scope}.{target}"
        # An optional autoref links when the target is documented and renders as plain code when it is not.
        return f'<autoref identifier="{target}" optional><code>{title}</code></autoref>'

    return replace


class RstRoles(griffe.Extension):
    """Rewrites reStructuredText roles in every docstring into Markdown the site renders."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:  # every role and directive has one
            text = ROLE.sub(_role_replacer(_scope(obj)), obj.docstring.value)
            text = DIRECTIVE.sub(_admonition, text)
            obj.docstring.value = LITERAL_BLOCK.sub(r"\1:\n\n", text)
