"""Limits the BSON codec's Python loops and its compiled ones (``_speedups.c``) share.

The compiled module reads these names when it is loaded, so this is their one definition: both decoders
refuse the same documents with the same error. Both encoders refuse dicts and lists nested deeper with the same
``InvalidDocument``; the compiled one counts every container (a Code's scope, a DBRef, any mapping), which the
Python one leaves to the recursion limit, with the same error.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_NESTING", "NESTED_TOO_DEEPLY"]

MAX_NESTING: Final = 256
"""How many documents, arrays or Code scopes may nest inside the outermost document (which is level 0).

MongoDB stores no document nested beyond 100 levels, and a reply wraps one in a few more, so a real server never
comes near. The limit exists so that a hostile peer cannot make the decoder recurse without bound, whatever the
interpreter's recursion limit. It stays well below the default recursion limit (1000): the Python loops spend up
to two frames a level (a Code scope, a mapping other than dict), so they reach the limit, and give its error,
before a ``RecursionError`` unless the caller is already hundreds of frames deep.
"""

NESTED_TOO_DEEPLY: Final = f"the BSON document is nested too deeply to decode (more than {MAX_NESTING} levels of documents or arrays)"
"""The message of the :class:`~mongio.bson.errors.InvalidBSON` both decoders raise beyond ``MAX_NESTING``."""
