"""``pymongo.asynchronous.client_session``: :class:`AsyncClientSession` is :class:`mongio.ClientSession`."""

from mongio.sessions.client_session import ClientSession, SessionOptions
from mongio.sessions.transaction_state import TransactionOptions

AsyncClientSession = ClientSession

__all__ = ["AsyncClientSession", "SessionOptions", "TransactionOptions"]
