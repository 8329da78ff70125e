"""``DocumentType``: the document type :class:`~mongio.client.MongoClient`, :class:`~mongio.database.Database`
and :class:`~mongio.collection.Collection` are generic over, as PyMongo's classes are over its
``_DocumentType``.

``client: MongoClient[Movie] = MongoClient()`` (``Movie`` a ``TypedDict``, say) types what its databases,
collections, cursors and ``find_one`` hand back, and what ``insert_one`` takes. Unparameterised, each class
is over ``dict[str, Any]``, what a client decodes into when no ``document_class`` is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["DocumentType"]

if TYPE_CHECKING:
    # The default (PEP 696) is for the type checker only: Python 3.11's TypeVar takes none, and a subscript
    # of a generic class is not checked at run time.
    from typing_extensions import TypeVar as TypeVarWithDefault

    DocumentType = TypeVarWithDefault("DocumentType", bound=Mapping[str, Any], default=dict[str, Any])
else:
    DocumentType = TypeVar("DocumentType", bound=Mapping[str, Any])
