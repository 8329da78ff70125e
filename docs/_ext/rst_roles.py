"""A griffe extension for the documentation build: docstrings use reStructuredText roles
(:class:`~mongio.errors.ConfigurationError`, :meth:`find`), which Markdown would show literally. Each role
becomes a cross-reference when it names a documented object, and inline code otherwise."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:class|meth|func|attr|exc|mod|data|obj|const):`(~?)(?:([^`<]*?)\s*<([^`>]+)>|([^`<>]+?))(?:\(\))?`"
)


def _replace(match: re.Match[str]) -> str:
    short, explicit_title, explicit_target, bare = match.groups()
    target = (explicit_target or bare).strip()
    title = " ".join(explicit_title.split()) if explicit_title else target
    if short and not explicit_title:
        title = target.rsplit(".", 1)[-1]
    if "." not in target:
        return f"`{title}`"
    # An optional autoref links when the target is documented and renders as plain code when it is not.
    return f'<autoref identifier="{target}" optional><code>{title}</code></autoref>'


class RstRoles(griffe.Extension):
    """Rewrites reStructuredText roles in every docstring into Markdown the site renders."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = ROLE.sub(_replace, obj.docstring.value)
