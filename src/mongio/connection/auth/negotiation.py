"""Which mechanism a credential uses: the one the application named, or for ``DEFAULT`` the one the
handshake's ``saslSupportedMechs`` points to."""

from __future__ import annotations

from collections.abc import Sequence

from mongio.connection.auth.base import CredentialLike

__all__ = [
    "DEFAULT",
    "negotiate_mechanism",
    "sasl_supported_mechs_request",
    "speculative_mechanism",
]

DEFAULT = "DEFAULT"
SCRAM_SHA_1 = "SCRAM-SHA-1"
SCRAM_SHA_256 = "SCRAM-SHA-256"


def _is_default(credential: CredentialLike) -> bool:
    return not credential.mechanism or credential.mechanism.upper() == DEFAULT


def sasl_supported_mechs_request(credential: CredentialLike) -> str | None:
    """``"<source>.<username>"`` for the hello when the mechanism is to be negotiated, else None.

    The username goes as given: the server matches the raw form, so it is not SASLprepped.
    """
    if _is_default(credential) and credential.username:
        return f"{credential.source}.{credential.username}"
    return None


def speculative_mechanism(credential: CredentialLike) -> str:
    """The mechanism to start speculatively in the hello: SCRAM-SHA-256 when none was named."""
    return SCRAM_SHA_256 if _is_default(credential) else credential.mechanism.upper()


def negotiate_mechanism(credential: CredentialLike, sasl_supported_mechs: Sequence[str] | None) -> str:
    """The mechanism to authenticate with.

    A named mechanism is honoured whatever the server says. ``DEFAULT`` becomes SCRAM-SHA-256 when the
    server lists it for the user, otherwise SCRAM-SHA-1 (even if unlisted, and never anything else). The
    list is not validated: unknown names in it are simply ignored.
    """
    if not _is_default(credential):
        return credential.mechanism.upper()
    if sasl_supported_mechs and SCRAM_SHA_256 in sasl_supported_mechs:
        return SCRAM_SHA_256
    return SCRAM_SHA_1
