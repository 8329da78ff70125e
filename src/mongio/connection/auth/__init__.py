"""Authentication of a new connection: mechanism negotiation, speculative authentication and the
conversations (SCRAM-SHA-1, SCRAM-SHA-256, PLAIN, MONGODB-X509, MONGODB-AWS, MONGODB-OIDC, GSSAPI), all
run through an injected
``async run_command(db, command) -> reply`` so no mechanism touches a socket.

For one connection::

    authenticator = Authenticator(credential)
    hello = await conn.command("admin", {**hello_command, **authenticator.handshake_fields()})
    await authenticator.authenticate(run_command, HelloResponse.from_document(hello))

``authenticate(credential, run_command, hello_response)`` does the same without speculation. After the
server answers an operation with ReauthenticationRequired (391), ``authenticator.reauthenticate(run_command)``
runs the conversation again on the same connection (MONGODB-OIDC only: ``reauthenticates``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mongio.connection.auth.base import AuthenticationFailed, CredentialLike, RunCommand
from mongio.connection.auth.negotiation import (
    negotiate_mechanism,
    sasl_supported_mechs_request,
    speculative_mechanism,
)
from mongio.connection.auth.plain import authenticate_plain
from mongio.connection.auth.x509 import authenticate_x509, speculative_x509_command
from mongio.errors import ConfigurationError

if TYPE_CHECKING:
    # SCRAM (hashing, SASLprep) is imported by the first conversation: clients without credentials never need it.
    from mongio.connection.auth.oidc import OidcConversation
    from mongio.connection.auth.oidc_cache import OidcTokenCache
    from mongio.connection.auth.scram import ScramConversation, ScramKeyCache

__all__ = [
    "AuthenticationFailed",
    "Authenticator",
    "CredentialLike",
    "HelloLike",
    "RunCommand",
    "authenticate",
]

_SCRAM = ("SCRAM-SHA-1", "SCRAM-SHA-256")
_OIDC = "MONGODB-OIDC"


class HelloLike(Protocol):
    """What authentication reads from the handshake reply."""

    @property
    def sasl_supported_mechs(self) -> Sequence[str] | None: ...

    @property
    def speculative_authenticate(self) -> Mapping[str, Any] | None: ...


class Authenticator:
    """Authenticates one new connection with one credential, speculatively when the server lets it.

    ``handshake_fields()`` gives what the hello must carry (``saslSupportedMechs`` for a credential without a
    mechanism, ``speculativeAuthenticate`` for SCRAM and X.509); ``authenticate()`` then finishes the job,
    skipping the first round trip when the hello's reply answered the speculative step. ``nonce`` fixes the
    SCRAM client nonce (tests only); ``cache`` replaces the process-wide SCRAM key cache. ``oidc_cache`` is the
    client's MONGODB-OIDC token cache (a fresh one when not given). ``address`` is the server the connection
    reached: GSSAPI names its service principal after its host, which a human OIDC callback's ``ALLOWED_HOSTS``
    must match.
    """

    def __init__(
        self,
        credential: CredentialLike,
        *,
        cache: ScramKeyCache | None = None,
        nonce: str | None = None,
        oidc_cache: OidcTokenCache | None = None,
        address: tuple[str, int | None] | None = None,
    ) -> None:
        self.credential = credential
        self.address = address
        self.cache = cache
        self._nonce = nonce
        self._speculative_mechanism: str | None = None
        self._conversation: ScramConversation | None = None
        self._oidc: OidcConversation | None = None
        if credential.mechanism.upper() == _OIDC:
            from mongio.connection.auth.oidc import OidcConversation
            from mongio.connection.auth.oidc_cache import OidcTokenCache

            self._oidc = OidcConversation(
                credential, oidc_cache or OidcTokenCache(), host=None if address is None else str(address[0])
            )
        self.used_speculative = False
        """True after ``authenticate()`` when the hello's speculative reply was used."""
        self.mechanism: str | None = None
        """The mechanism ``authenticate()`` used."""

    def _scram_conversation(self, mechanism: str) -> ScramConversation:
        from mongio.connection.auth.scram import ScramConversation, scram_mechanism

        credential = self.credential
        if not credential.username or credential.password is None:
            raise ConfigurationError(f"{mechanism} needs a username and a password")
        return ScramConversation(
            scram_mechanism(mechanism),
            credential.username,
            credential.password,
            source=credential.source,
            nonce=self._nonce,
        )

    def handshake_fields(self) -> dict[str, Any]:
        """The hello fields authentication adds; call once per connection."""
        fields: dict[str, Any] = {}
        negotiate = sasl_supported_mechs_request(self.credential)
        if negotiate is not None:
            fields["saslSupportedMechs"] = negotiate
        mechanism = speculative_mechanism(self.credential)
        if mechanism in _SCRAM:
            try:
                self._conversation = self._scram_conversation(mechanism)
            except ConfigurationError:
                if negotiate is None:
                    raise
                # A password SASLprep refuses may still be fine for the SCRAM-SHA-1 negotiation can pick:
                # speculate on nothing and let authenticate() decide.
                return fields
            fields["speculativeAuthenticate"] = self._conversation.speculative_command()
        elif mechanism == "MONGODB-X509":
            fields["speculativeAuthenticate"] = speculative_x509_command(self.credential.username)
        elif self._oidc is not None and (oidc_command := self._oidc.speculative_command()) is not None:
            fields["speculativeAuthenticate"] = oidc_command
        else:
            return fields
        self._speculative_mechanism = mechanism
        return fields

    @property
    def reauthenticates(self) -> bool:
        """Whether ``reauthenticate()`` can answer a ReauthenticationRequired error (MONGODB-OIDC only)."""
        return self._oidc is not None

    async def reauthenticate(self, run_command: RunCommand, *, deadline: float | None = None) -> None:
        """Authenticate the connection again, without a hello (after ReauthenticationRequired, 391)."""
        if self._oidc is None:
            raise ConfigurationError(f"{self.credential.mechanism} cannot reauthenticate a connection")
        await self._oidc.reauthenticate(run_command, deadline=deadline)

    async def authenticate(
        self, run_command: RunCommand, hello: HelloLike | None, *, deadline: float | None = None
    ) -> None:
        """Finish authentication after the handshake; raises ``AuthenticationFailed`` when refused.

        ``deadline`` (``loop.time()`` terms) also bounds what a mechanism waits for besides the server
        (MONGODB-AWS's credential requests, an OIDC machine callback, GSSAPI's Kerberos calls); ``run_command``
        bounds the commands themselves.
        """
        mechanism = negotiate_mechanism(self.credential, hello.sasl_supported_mechs if hello else None)
        self.mechanism = mechanism
        speculative_reply = hello.speculative_authenticate if hello is not None else None
        if mechanism != self._speculative_mechanism:
            speculative_reply = None
        self.used_speculative = speculative_reply is not None
        if mechanism in _SCRAM:
            from mongio.connection.auth.scram import authenticate_scram

            conversation = self._conversation if speculative_reply is not None else None
            if conversation is None:
                conversation = self._scram_conversation(mechanism)
            await authenticate_scram(
                self.credential,
                mechanism,
                run_command,
                conversation=conversation,
                speculative_reply=speculative_reply,
                cache=self.cache,
            )
        elif mechanism == "MONGODB-X509":
            await authenticate_x509(self.credential, run_command, speculative_reply=speculative_reply)
        elif mechanism == "PLAIN":
            await authenticate_plain(self.credential, run_command)
        elif mechanism == "GSSAPI":
            await self._authenticate_gssapi(run_command, deadline)
        elif mechanism == "MONGODB-AWS":
            from mongio.connection.auth.aws import authenticate_aws

            await authenticate_aws(self.credential, run_command, deadline=deadline)
        elif mechanism == _OIDC:
            assert self._oidc is not None
            await self._oidc.authenticate(run_command, speculative_reply=speculative_reply, deadline=deadline)
        else:
            raise ConfigurationError(f"unknown authentication mechanism {mechanism!r}")


    async def _authenticate_gssapi(self, run_command: RunCommand, deadline: float | None) -> None:
        # Kerberos (python-gssapi) is imported by the first GSSAPI conversation only.
        from mongio.connection.auth.gssapi import authenticate_gssapi, server_host

        if self.address is None:
            raise ConfigurationError("GSSAPI needs the address of the server to name its service principal")
        await authenticate_gssapi(self.credential, run_command, server_host(self.address), deadline=deadline)


async def authenticate(
    credential: CredentialLike,
    run_command: RunCommand,
    hello_response: HelloLike | None = None,
    *,
    authenticator: Authenticator | None = None,
) -> None:
    """Authenticate ``credential`` over ``run_command`` after a handshake whose reply is ``hello_response``.

    Pass the ``authenticator`` whose ``handshake_fields()`` went into that hello to use its speculative
    reply; without one the conversation starts from the beginning.
    """
    await (authenticator or Authenticator(credential)).authenticate(run_command, hello_response)
