"""No MONGODB-OIDC access token or refresh token in any error, log record, command event or ``repr``.

``CASES`` provoke the mechanism's failures (refused tokens, failing, slow and hostile callbacks and metadata
endpoints, failed reauthentication, the human flow's refused refresh) while the tokens in play carry a marker.
Every ``raise`` of the OIDC modules and of the HTTP client the metadata endpoints are asked through
(``RAISE_FILES``) must be reached by a case (``test_every_oidc_raise_site_is_reached``): a new raise site
without a case fails it.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import socket
import struct
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import mongio
from mongio import MongoClient
from mongio.auth_oidc import OIDCCallbackContext, OIDCCallbackResult, OIDCIdPInfo
from mongio.bson import encode
from mongio.connection.auth import Authenticator
from mongio.connection.auth.oidc import OidcConversation, _idp_info
from mongio.connection.auth.oidc_cache import OidcTokenCache, call_callback
from mongio.connection.auth.oidc_environments import environment_callback
from mongio.connection.http import HttpError, HttpResponse, http_request
from mongio.errors import ConfigurationError, MongioError
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.options.credentials import MongoCredential
from tests.support.metadata_endpoint import Answer, MetadataEndpoint
from tests.support.oidc_server import OidcServer

MARKER = "tok3nSECRET"
REFRESH = "refr3shSECRET"
MARKERS = (MARKER, REFRESH, "SECRET")

SRC = Path(mongio.__file__).resolve().parent
RAISE_FILES = (
    *(SRC / "connection/auth" / name for name in ("oidc.py", "oidc_cache.py", "oidc_environments.py")),
    SRC / "connection/http.py",
)
# Raise sites no case can reach, with why.
UNREACHABLE = {
    # The conversation is only built for a credential the options validated: ENVIRONMENT or a callback is there.
    ("connection/auth/oidc.py", "__init__"),
    # Options refuse an unknown ENVIRONMENT and azure/gcp without TOKEN_RESOURCE before a callback is made.
    ("connection/auth/oidc_environments.py", "environment_callback"),
    ("connection/auth/oidc_environments.py", "_resource"),
}


def bad_token(server: OidcServer) -> str:
    """A token the server refuses (signed with another key) that carries the marker."""
    return server.issue(MARKER, key=b"another-key") + MARKER


def good_token(server: OidcServer) -> str:
    return server.issue(MARKER)


class Events(CommandListener):
    def __init__(self) -> None:
        self.shown: list[str] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.shown += [repr(event), repr(event.command)]

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.shown += [repr(event), repr(event.reply)]

    def failed(self, event: CommandFailedEvent) -> None:
        self.shown += [repr(event), repr(event.failure)]


@dataclass
class Case:
    id: str
    run: Callable[[OidcServer, MetadataEndpoint, Events], Awaitable[object]]


def client(server: OidcServer, events: Events, properties: dict[str, Any], **options: Any) -> MongoClient:
    return MongoClient(
        server.uri,
        authMechanism="MONGODB-OIDC",
        authMechanismProperties=properties,
        directConnection=True,
        retryReads=False,
        serverSelectionTimeoutMS=2000,
        event_listeners=[events],
        **options,
    )


async def find_with(server: OidcServer, events: Events, properties: dict[str, Any], **options: Any) -> None:
    async with client(server, events, properties, **options) as c:
        await c.db.coll.find_one({})


def tokens(*values: str, refresh: str | None = None) -> Callable[[OIDCCallbackContext], OIDCCallbackResult]:
    calls = iter(range(1 << 30))

    def callback(context: OIDCCallbackContext) -> OIDCCallbackResult:
        index = min(next(calls), len(values) - 1)
        return OIDCCallbackResult(access_token=values[index], refresh_token=refresh)

    return callback


async def refused_token(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    await find_with(server, events, {"OIDC_CALLBACK": tokens(bad_token(server))})


async def failed_reauthentication(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    good = good_token(server)
    async with client(server, events, {"OIDC_CALLBACK": tokens(good, bad_token(server))}) as c:
        await c.db.coll.find_one({})
        server.revoke(good)
        await c.db.coll.find_one({})


async def human_refresh_refused(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    good = good_token(server)
    callback = tokens(good, bad_token(server), refresh=REFRESH)
    async with client(server, events, {"OIDC_HUMAN_CALLBACK": callback}) as c:
        await c.db.coll.find_one({})
        server.fail("find", code=391)
        await c.db.coll.find_one({})


async def human_host_not_allowed(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    await find_with(server, events, {"OIDC_HUMAN_CALLBACK": tokens(MARKER), "ALLOWED_HOSTS": ["example.com"]})


async def human_bad_idp_info(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    _idp_info(encode({"issuer": 5, "secret": MARKER}))


async def human_idp_info_not_bson(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    _idp_info(MARKER.encode())


async def human_idp_info_scopes(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    _idp_info(encode({"issuer": "https://i", "requestScopes": [MARKER, 1]}))


async def human_idp_info_client_id(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    _idp_info(encode({"issuer": "https://i", "clientId": [MARKER]}))


def context(timeout: float = 5.0) -> OIDCCallbackContext:
    return OIDCCallbackContext(timeout_seconds=timeout, username=None, refresh_token=REFRESH)


async def callback_raises(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    def failing(context: OIDCCallbackContext) -> OIDCCallbackResult:
        raise RuntimeError("the identity provider is down")

    await find_with(server, events, {"OIDC_CALLBACK": failing})


async def callback_times_out(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    async def slow(context: OIDCCallbackContext) -> OIDCCallbackResult:
        await asyncio.sleep(30)
        return OIDCCallbackResult(access_token=MARKER)

    await call_callback(slow, context(0.05), "OIDC_CALLBACK")


def _returning(result: Any) -> Callable[[OidcServer, MetadataEndpoint, Events], Awaitable[object]]:
    async def run(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
        await call_callback(lambda context: result, context(), "OIDC_CALLBACK")

    return run


def _metadata(
    answer: Answer, environment: str = "gcp"
) -> Callable[[OidcServer, MetadataEndpoint, Events], Awaitable[object]]:
    async def run(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
        endpoint.answer = answer
        variable = "MONGIO_OIDC_GCP_ENDPOINT" if environment == "gcp" else "MONGIO_OIDC_AZURE_ENDPOINT"
        await environment_callback(environment, "resource", {variable: endpoint.base_url})(context(0.5))

    return run


def _gcp_endpoint(base: str) -> Callable[[OidcServer, MetadataEndpoint, Events], Awaitable[object]]:
    async def run(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
        await environment_callback("gcp", "resource", {"MONGIO_OIDC_GCP_ENDPOINT": base})(context(5))

    return run


def _raw_reply(raw: bytes) -> Callable[[OidcServer, MetadataEndpoint, Events], Awaitable[object]]:
    """A GCP metadata endpoint that answers ``raw`` (or resets the connection when it is empty)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        if not raw:
            writer.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )  # closing now sends a reset
        else:
            writer.write(raw)
            await writer.drain()
        writer.close()

    async def run(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
        listener = await asyncio.start_server(answer, "127.0.0.1", 0)
        try:
            await _gcp_endpoint(f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}")(
                server, endpoint, events
            )
        finally:
            listener.close()
            await listener.wait_closed()

    return run


async def metadata_unreachable(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    async with MetadataEndpoint() as closed:
        base = closed.base_url
    await _gcp_endpoint(base)(server, endpoint, events)


async def header_injection(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    await http_request("GET", endpoint.base_url, headers={"Authorization": f"Bearer {MARKER}\r\nX: y"})


_OK = b"HTTP/1.1 200 OK\r\n"
_CHUNKED = _OK + b"Transfer-Encoding: chunked\r\n\r\n"
_SECRET = MARKER.encode()


async def token_file_missing(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    await environment_callback("test", None, {"OIDC_TOKEN_FILE": "/nonexistent/oidc-token"})(context())


async def token_file_unset(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    await environment_callback("test", None, {})(context())


async def token_file_empty(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    await environment_callback("test", None, {"OIDC_TOKEN_FILE": "/dev/null"})(context())


async def reauthenticate_without_oidc(server: OidcServer, endpoint: MetadataEndpoint, events: Events) -> None:
    credential = MongoCredential("SCRAM-SHA-256", "admin", "alice", MARKER)

    async def run_command(db: str, command: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("not reached")

    await Authenticator(credential).reauthenticate(run_command)


def _cases() -> Iterator[Case]:
    yield Case("refused-token", refused_token)
    yield Case("failed-reauthentication", failed_reauthentication)
    yield Case("human-refresh-refused", human_refresh_refused)
    yield Case("human-host-not-allowed", human_host_not_allowed)
    yield Case("human-idp-info-issuer", human_bad_idp_info)
    yield Case("human-idp-info-not-bson", human_idp_info_not_bson)
    yield Case("human-idp-info-scopes", human_idp_info_scopes)
    yield Case("human-idp-info-client-id", human_idp_info_client_id)
    yield Case("callback-raises", callback_raises)
    yield Case("callback-times-out", callback_times_out)
    yield Case("callback-returns-none", _returning(None))
    yield Case("callback-returns-dict", _returning({"access_token": MARKER}))
    yield Case(
        "callback-returns-empty", _returning(OIDCCallbackResult(access_token="", refresh_token=REFRESH))
    )
    yield Case(
        "callback-negative-expiry", _returning(OIDCCallbackResult(access_token=MARKER, expires_in_seconds=-5))
    )
    yield Case(
        "callback-bad-refresh-type",
        _returning(OIDCCallbackResult(access_token=MARKER, refresh_token=[REFRESH])),  # type: ignore[arg-type]
    )
    yield Case("metadata-error-status", _metadata(Answer(401, b"unauthorized")))
    yield Case("metadata-slow", _metadata(Answer(200, MARKER.encode(), delay=30)))
    yield Case("metadata-hang-up", _metadata(Answer(hang_up=True)))
    yield Case("metadata-empty-gcp-token", _metadata(Answer(200, b"  ")))
    yield Case("metadata-oversized", _metadata(Answer(200, MARKER.encode() * 100_000)))
    yield Case("metadata-oversized-chunked", _metadata(Answer(200, MARKER.encode() * 100_000, chunked=True)))
    yield Case(
        "metadata-azure-no-token", _metadata(Answer(200, json.dumps({"refresh": MARKER}).encode()), "azure")
    )
    yield Case("metadata-azure-empty-token", _metadata(Answer(200, b'{"access_token": ""}'), "azure"))
    yield Case("metadata-not-http-url", _gcp_endpoint(f"ftp://127.0.0.1/{MARKER}"))
    yield Case("metadata-malformed-url", _gcp_endpoint(f"http://127.0.0.1:99999/{MARKER}"))
    yield Case("metadata-unreachable", metadata_unreachable)
    yield Case("metadata-reset", _raw_reply(b""))
    yield Case("metadata-header-injection", header_injection)
    yield Case("metadata-not-http-reply", _raw_reply(b"garbage " + _SECRET + b"\r\n\r\n"))
    yield Case("metadata-long-header-line", _raw_reply(_OK + b"X: " + _SECRET * 4000 + b"\r\n\r\n"))
    yield Case("metadata-cut-in-headers", _raw_reply(_OK + b"X: " + _SECRET))
    yield Case("metadata-header-without-colon", _raw_reply(_OK + _SECRET + b"\r\n\r\n"))
    yield Case("metadata-too-many-headers", _raw_reply(_OK + (b"X: " + _SECRET + b"\r\n") * 101 + b"\r\n"))
    yield Case("metadata-bad-chunk", _raw_reply(_CHUNKED + _SECRET + b"\r\n"))
    yield Case("metadata-cut-in-chunk", _raw_reply(_CHUNKED + b"ff\r\n" + _SECRET))
    yield Case("metadata-bad-length", _raw_reply(_OK + b"Content-Length: " + _SECRET + b"\r\n\r\n"))
    yield Case("metadata-cut-in-body", _raw_reply(_OK + b"Content-Length: 100\r\n\r\n" + _SECRET))
    yield Case(
        "metadata-oversized-unframed", _raw_reply(_OK + b"Connection: close\r\n\r\n" + _SECRET * 100_000)
    )
    yield Case("token-file-missing", token_file_missing)
    yield Case("token-file-unset", token_file_unset)
    yield Case("token-file-empty", token_file_empty)
    yield Case("reauthenticate-without-oidc", reauthenticate_without_oidc)


CASES = list(_cases())


def _chain(error: BaseException) -> Iterator[BaseException]:
    pending: list[BaseException | None] = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [current.__cause__, current.__context__]


async def _provoke(case: Case) -> tuple[BaseException, Events]:
    events = Events()
    async with OidcServer() as server, MetadataEndpoint() as endpoint:
        with pytest.raises((MongioError, HttpError, OSError)) as info:
            await case.run(server, endpoint, events)
    return info.value, events


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_no_token_in_what_a_failure_shows(case: Case, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    error, events = await _provoke(case)
    assert str(error), "the error names the problem"
    shown = ["".join(traceback.format_exception(error)), *events.shown]
    for item in _chain(error):
        shown += [str(item), repr(item), repr(item.args), repr(getattr(item, "details", None))]
    for record in caplog.records:
        shown += [record.getMessage(), repr(record.args)]
    for text in shown:
        for marker in MARKERS:
            assert marker not in text, text


def test_reprs_hold_no_token() -> None:
    cache = OidcTokenCache()
    cached = cache.put(MARKER)
    credential = MongoCredential("MONGODB-OIDC", "$external", None, None, {"OIDC_CALLBACK": tokens(MARKER)})
    conversation = OidcConversation(credential, cache)
    conversation.speculative_command()
    shown = [
        repr(cache),
        repr(cached),
        repr(conversation),
        repr(OIDCCallbackResult(access_token=MARKER, refresh_token=REFRESH)),
        repr(context()),
        repr(OIDCIdPInfo(issuer="https://i")),
        repr(HttpResponse(200, {"x-token": MARKER}, MARKER.encode())),
    ]
    for text in shown:
        for marker in MARKERS:
            assert marker not in text, text


def _raise_sites() -> dict[tuple[str, int], str]:
    sites: dict[tuple[str, int], str] = {}
    for path in RAISE_FILES:
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Raise) and node.exc is not None:
                    sites[(str(path), node.lineno)] = function.name
    return sites


def test_every_oidc_raise_site_is_reached() -> None:
    files = {str(path) for path in RAISE_FILES}
    reached: set[tuple[str, int]] = set()
    raised: list[BaseException] = []

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "exception" and not any(arg[1] is item for item in raised):
            raised.append(arg[1])
            reached.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def start(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename in files else None

    async def run_all() -> None:
        previous = sys.gettrace()
        sys.settrace(start)
        try:
            for case in CASES:
                try:
                    await _provoke(case)
                except AssertionError:
                    pass
        finally:
            sys.settrace(previous)

    asyncio.run(run_all())
    missing = [
        f"{Path(path).relative_to(SRC)}:{line} ({function})"
        for (path, line), function in sorted(_raise_sites().items())
        if (path, line) not in reached and (str(Path(path).relative_to(SRC)), function) not in UNREACHABLE
    ]
    assert not missing, f"OIDC raise sites no case reaches (add a case to CASES): {missing}"


def test_configuration_errors_name_no_callback_secret() -> None:
    with pytest.raises(ConfigurationError) as info:
        MongoClient(
            "mongodb://h/?authMechanism=MONGODB-OIDC",
            authMechanismProperties={"OIDC_CALLBACK": MARKER},
            connect=False,
        )
    assert MARKER not in str(info.value)
