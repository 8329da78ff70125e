"""The client's TLS settings, typed, from the ``tls*`` options.

The field names match :class:`mongio.connection.tls.TLSOptions`, which builds the ``ssl.SSLContext``.
``tlsInsecure`` relaxes both certificate and host name verification.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mongio.errors import ConfigurationError

__all__ = ["TLSOptions", "tls_options_from"]


@dataclass(frozen=True, slots=True)
class TLSOptions:
    """TLS settings of a client that uses TLS (``tls=true``, or a ``mongodb+srv`` string)."""

    ca_file: str | None = None
    """``tlsCAFile``: PEM bundle of trusted CAs; the system's default CAs when None."""
    certificate_key_file: str | None = None
    """``tlsCertificateKeyFile``: PEM file holding the client certificate and its private key."""
    certificate_key_file_password: str | None = field(default=None, repr=False)
    """``tlsCertificateKeyFilePassword``: decrypts the private key."""
    crl_file: str | None = None
    """``tlsCRLFile``: certificate revocation list to check the server certificate against."""
    insecure: bool = False
    """``tlsInsecure``: skip certificate and host name verification."""
    allow_invalid_hostnames: bool = False
    """``tlsAllowInvalidHostnames``."""
    allow_invalid_certificates: bool = False
    """``tlsAllowInvalidCertificates``."""
    disable_ocsp_endpoint_check: bool | None = None
    """``tlsDisableOCSPEndpointCheck``: never ask OCSP responders; None when not given (false)."""
    disable_certificate_revocation_check: bool | None = None
    """``tlsDisableCertificateRevocationCheck``: check no revocation at all; None when not given (false)."""

    @property
    def verifies_certificates(self) -> bool:
        return not (self.insecure or self.allow_invalid_certificates)

    @property
    def verifies_hostnames(self) -> bool:
        return self.verifies_certificates and not self.allow_invalid_hostnames

    @property
    def checks_ocsp_endpoint(self) -> bool:
        """Whether the server certificate's OCSP responder is asked about its revocation (see docs/ocsp.md).

        Off with ``tlsInsecure`` or ``tlsAllowInvalidCertificates`` (the OCSP specification: they disable
        OCSP), and with either of the two options that turn it off.
        """
        return (
            self.verifies_certificates
            and not self.disable_ocsp_endpoint_check
            and not self.disable_certificate_revocation_check
        )

    @property
    def ocsp_check_requested(self) -> bool:
        """True when one of the OCSP options was given as false: the check was asked for explicitly."""
        return self.disable_ocsp_endpoint_check is False or self.disable_certificate_revocation_check is False


_TLS_OPTION_NAMES = (
    "tlsCAFile",
    "tlsCertificateKeyFile",
    "tlsCertificateKeyFilePassword",
    "tlsCRLFile",
    "tlsInsecure",
    "tlsAllowInvalidHostnames",
    "tlsAllowInvalidCertificates",
    "tlsDisableOCSPEndpointCheck",
    "tlsDisableCertificateRevocationCheck",
)


def tls_options_from(options: Mapping[str, Any], *, is_srv: bool) -> TLSOptions | None:
    """The TLS settings ``options`` ask for, or ``None`` when TLS is off.

    TLS is on when ``tls``/``ssl`` is true; when it is not given, TLS is on for ``mongodb+srv`` strings and
    whenever another ``tls*`` option is given (a CA file without TLS would otherwise be silently unused).
    ``tlsCRLFile`` with ``tlsDisableCertificateRevocationCheck=true`` raises ``ConfigurationError``.
    """
    explicit = options.get("tls")
    if explicit is None:
        enabled = is_srv or any(name in options for name in _TLS_OPTION_NAMES)
    else:
        enabled = bool(explicit)
    if not enabled:
        return None
    if options.get("tlsCRLFile") is not None and options.get("tlsDisableCertificateRevocationCheck"):
        # The OCSP specification: with the option true, no revocation is checked, CRLs included.
        raise ConfigurationError(
            "tlsCRLFile and tlsDisableCertificateRevocationCheck=true contradict each other: the list is a "
            "revocation check, which the option turns off; give one or the other"
        )
    insecure = bool(options.get("tlsInsecure", False))
    return TLSOptions(
        ca_file=options.get("tlsCAFile"),
        certificate_key_file=options.get("tlsCertificateKeyFile"),
        certificate_key_file_password=options.get("tlsCertificateKeyFilePassword"),
        crl_file=options.get("tlsCRLFile"),
        insecure=insecure,
        allow_invalid_hostnames=insecure or bool(options.get("tlsAllowInvalidHostnames", False)),
        allow_invalid_certificates=insecure or bool(options.get("tlsAllowInvalidCertificates", False)),
        disable_ocsp_endpoint_check=options.get("tlsDisableOCSPEndpointCheck"),
        disable_certificate_revocation_check=options.get("tlsDisableCertificateRevocationCheck"),
    )
