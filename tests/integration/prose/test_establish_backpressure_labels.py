"""CMAP backpressure: network failures while connecting or during the hello carry SystemOverloadedError and
RetryableError; failures an overloaded server cannot cause (DNS, authentication) carry neither."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from mongio.backend import running_loop
from mongio.connection.establish import ConnectionSettings, establish
from mongio.error_classification import OVERLOAD_LABELS
from mongio.errors import AutoReconnect
from mongio.options.credentials import MongoCredential
from tests.support.loopback_peer import CLOSE, LoopbackPeer, Request


def overload_labelled(error: AutoReconnect) -> bool:
    return all(error.has_error_label(label) for label in OVERLOAD_LABELS)


async def test_a_refused_connection_is_labelled() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(AutoReconnect) as caught:
        await establish(("127.0.0.1", port), ConnectionSettings(connect_timeout=5))
    assert overload_labelled(caught.value)


async def test_a_host_that_does_not_resolve_is_not_labelled(monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up: list[str] = []

    async def no_such_host(host: str, *args: Any, **kwargs: Any) -> Any:
        looked_up.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    # The running loop's getaddrinfo is the backend seam's resolver, on asyncio and on trio alike.
    monkeypatch.setattr(running_loop(), "getaddrinfo", no_such_host)
    with pytest.raises(AutoReconnect, match="cannot resolve") as caught:
        await establish(("db.example.invalid", 27017), ConnectionSettings(connect_timeout=5))
    assert caught.value.error_labels == frozenset()
    assert looked_up == ["db.example.invalid"]


async def test_a_connection_dropped_during_hello_is_labelled() -> None:
    async def drop_hello(request: Request) -> Any:
        return CLOSE if request.command_name in ("hello", "isMaster", "ismaster") else None

    async with LoopbackPeer(drop_hello) as peer:
        with pytest.raises(AutoReconnect) as caught:
            await establish(peer.address, ConnectionSettings(connect_timeout=5))
    assert overload_labelled(caught.value)


async def test_a_connection_dropped_during_authentication_is_not_labelled() -> None:
    async def drop_sasl(request: Request) -> Any:
        return CLOSE if request.command_name in ("saslStart", "saslContinue") else None

    credential = MongoCredential(
        mechanism="SCRAM-SHA-256", source="admin", username="user", password="pencil", mechanism_properties={}
    )
    async with LoopbackPeer(drop_sasl) as peer:
        with pytest.raises(AutoReconnect) as caught:
            await establish(peer.address, ConnectionSettings(credential=credential, connect_timeout=5))
    assert not any(caught.value.has_error_label(label) for label in OVERLOAD_LABELS)
