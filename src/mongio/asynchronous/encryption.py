"""``pymongo.asynchronous.encryption``: :class:`AsyncClientEncryption` is
:class:`mongio.encryption.ClientEncryption`."""

from mongio.encryption import Algorithm, QueryType
from mongio.encryption.client_encryption import ClientEncryption, RewrapManyDataKeyResult

AsyncClientEncryption = ClientEncryption

__all__ = ["Algorithm", "AsyncClientEncryption", "QueryType", "RewrapManyDataKeyResult"]
