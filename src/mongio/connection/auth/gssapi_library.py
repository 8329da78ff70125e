"""The Kerberos library GSSAPI authentication calls, behind a small typed interface.

python-gssapi (the ``mongio[gssapi]`` extra, built against MIT Kerberos or Heimdal) is imported by the first
GSSAPI conversation, never before. Every method here BLOCKS: acquiring credentials may talk to the KDC, a
context step may fetch a service ticket, and even wrap/unwrap take the library's locks. The conversation
(``gssapi.py``) calls them in a worker thread only. Errors of the library become ``KerberosError``, whose
text is the library's own major/minor status message (principal names, never a password or a key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from mongio.errors import ConfigurationError

__all__ = [
    "INSTALL_HINT",
    "KerberosError",
    "KerberosLibrary",
    "SecurityContext",
    "ServiceName",
    "python_gssapi",
]

INSTALL_HINT = "install mongio[gssapi] (python-gssapi, which builds against MIT Kerberos' libkrb5-dev)"


class KerberosError(Exception):
    """The Kerberos library refused a step; the message is the library's, without any secret."""


@dataclass(frozen=True)
class ServiceName:
    """The service principal to authenticate to: ``service/host``, in ``realm`` when given, else in the realm
    the Kerberos configuration maps ``host`` to."""

    service: str
    host: str
    realm: str | None = None

    def __str__(self) -> str:
        principal = f"{self.service}/{self.host}"
        return principal if self.realm is None else f"{principal}@{self.realm}"


class SecurityContext(Protocol):
    """One initiator's GSS-API security context (blocking calls)."""

    @property
    def complete(self) -> bool:
        """True once the context is established (no more tokens to exchange)."""
        ...

    def step(self, token: bytes | None) -> bytes:
        """Feed the server's token (``None`` to start); the token to send back (empty when none)."""
        ...

    def unwrap(self, message: bytes) -> bytes:
        """The plaintext of a message the server wrapped, its integrity checked."""
        ...

    def wrap(self, message: bytes) -> bytes:
        """``message`` integrity-protected (not encrypted) for the server."""
        ...


class KerberosLibrary(Protocol):
    """Opens initiator contexts (blocking)."""

    def open_context(self, user: str, password: str | None, service: ServiceName) -> SecurityContext:
        """Acquire ``user``'s credentials (from the credential cache, or from the KDC with ``password``) and
        start a context to ``service``."""
        ...


def python_gssapi() -> KerberosLibrary:
    """python-gssapi behind ``KerberosLibrary``; ``ConfigurationError`` naming the extra when it is missing."""
    try:
        import gssapi
    except ImportError as exc:
        raise ConfigurationError(f"GSSAPI authentication needs python-gssapi: {INSTALL_HINT}") from exc
    return _PythonGssapi(gssapi)


class _PythonGssapiContext:
    def __init__(self, context: Any, error: type[Exception]) -> None:
        self._context = context
        self._error = error

    @property
    def complete(self) -> bool:
        return bool(self._context.complete)

    def step(self, token: bytes | None) -> bytes:
        try:
            produced = self._context.step(token)
        except self._error as exc:
            raise KerberosError(_message(exc)) from None
        return bytes(produced) if produced is not None else b""

    def unwrap(self, message: bytes) -> bytes:
        try:
            return bytes(self._context.unwrap(message).message)
        except self._error as exc:
            raise KerberosError(_message(exc)) from None

    def wrap(self, message: bytes) -> bytes:
        try:
            return bytes(self._context.wrap(message, False).message)
        except self._error as exc:
            raise KerberosError(_message(exc)) from None


class _PythonGssapi:
    def __init__(self, module: Any) -> None:
        self._gssapi = module
        self._error: type[Exception] = module.exceptions.GSSError

    def open_context(self, user: str, password: str | None, service: ServiceName) -> SecurityContext:
        gssapi = self._gssapi
        try:
            credentials = self._credentials(user, password)
            target = self._target(service)
            context = gssapi.SecurityContext(
                name=target,
                creds=credentials,
                usage="initiate",
                mech=gssapi.MechType.kerberos,
                flags=gssapi.RequirementFlag.mutual_authentication
                | gssapi.RequirementFlag.integrity,
            )
        except self._error as exc:
            raise KerberosError(_message(exc)) from None
        return _PythonGssapiContext(context, self._error)

    def _target(self, service: ServiceName) -> Any:
        gssapi = self._gssapi
        if service.realm is None:
            # A host-based service name: Kerberos maps the host to its realm ([domain_realm], referrals).
            return gssapi.Name(f"{service.service}@{service.host}", name_type=gssapi.NameType.hostbased_service)
        return gssapi.Name(str(service), name_type=gssapi.NameType.kerberos_principal)

    def _credentials(self, user: str, password: str | None) -> Any:
        gssapi = self._gssapi
        principal = gssapi.Name(user, name_type=gssapi.NameType.kerberos_principal)
        if password is None:
            # The credential cache's ticket (kinit, or KRB5CCNAME), for that principal only.
            return gssapi.Credentials(name=principal, usage="initiate")
        try:
            # The "password" extension of RFC 5587's era: MIT Kerberos and Heimdal have it, SSPI does not.
            from gssapi.raw import acquire_cred_with_password
        except ImportError:
            raise ConfigurationError(
                "GSSAPI with a password needs a Kerberos library with gss_acquire_cred_with_password "
                "(MIT Kerberos or Heimdal); run kinit and leave the password out instead"
            ) from None
        # An AS exchange with the KDC; the ticket stays in this credential (a memory cache), never on disk.
        acquired = acquire_cred_with_password(principal, password.encode("utf-8"), usage="initiate")
        return gssapi.Credentials(base=acquired.creds)


def _message(error: Any) -> str:
    """The library's status text: ``GSSError.gen_message()`` reads only the major and minor status codes."""
    return str(error.gen_message())
