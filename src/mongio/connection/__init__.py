"""Connections to a server: the byte stream (TCP, TLS, Unix socket), the framing protocol, and ``Connection``."""

from mongio.connection.connection import Connection, check_command_reply, connect
from mongio.connection.protocol import MessageProtocol
from mongio.connection.tls import TLSOptions, create_ssl_context
from mongio.connection.transport import Address, format_address, open_transport

__all__ = [
    "Address",
    "Connection",
    "MessageProtocol",
    "TLSOptions",
    "check_command_reply",
    "connect",
    "create_ssl_context",
    "format_address",
    "open_transport",
]
