"""Client-side field level encryption and Queryable Encryption (PyMongo's ``pymongo.encryption``):
:class:`ClientEncryption` for explicit encryption and the key vault, on libmongocrypt through the
``mongio[encryption]`` extra (``pymongocrypt``), which is imported only when a ``ClientEncryption`` is made.

``AsyncClientEncryption`` is the same class under PyMongo's asynchronous name. docs/encryption.md shows how
to set it up and use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongio.encryption_options import (
    Algorithm,
    AutoEncryptionOpts,
    QueryType,
    RangeOpts,
    StringOpts,
    TextOpts,
)

if TYPE_CHECKING:
    from mongio.encryption.client_encryption import ClientEncryption, RewrapManyDataKeyResult

    AsyncClientEncryption = ClientEncryption

__all__ = [
    "Algorithm",
    "AsyncClientEncryption",
    "AutoEncryptionOpts",
    "ClientEncryption",
    "QueryType",
    "RangeOpts",
    "RewrapManyDataKeyResult",
    "StringOpts",
    "TextOpts",
]

_LAZY = {"ClientEncryption", "AsyncClientEncryption", "RewrapManyDataKeyResult"}


def __getattr__(name: str) -> Any:
    # The client machinery is imported when first named: importing the options costs nothing.
    if name in _LAZY:
        from mongio.encryption import client_encryption

        if name == "AsyncClientEncryption":
            return client_encryption.ClientEncryption
        return getattr(client_encryption, name)
    raise AttributeError(f"module 'mongio.encryption' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
