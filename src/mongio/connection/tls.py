"""Building the ``ssl.SSLContext`` for TLS connections from the ``tls*`` options.

What each relaxation does, exactly:

- ``tlsAllowInvalidHostnames``: the server certificate must still chain to a trusted CA, but its names are not
  compared with the host connected to.
- ``tlsAllowInvalidCertificates``: the server certificate is not verified at all (which implies no hostname
  check either).
- ``tlsInsecure``: both of the above.
- ``tlsDisableOCSPEndpointCheck`` and ``tlsDisableCertificateRevocationCheck`` are accepted and change nothing:
  Python's ``ssl`` module neither contacts OCSP responders nor checks stapled OCSP responses, and no CRL is
  loaded unless the system's default verify paths carry one, so there is no revocation check to turn off.

The server name is always sent (SNI) so that proxies and multi-tenant front ends can route the connection,
even when hostname verification is off.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from mongio.errors import ConfigurationError

__all__ = ["TLSOptions", "create_ssl_context"]


@dataclass(frozen=True, slots=True)
class TLSOptions:
    """The typed TLS settings of a client (the URI's ``tls*`` options)."""

    ca_file: str | None = None
    """``tlsCAFile``: PEM bundle of trusted CAs; the system's default CAs when None."""
    certificate_key_file: str | None = None
    """``tlsCertificateKeyFile``: PEM file holding the client certificate and its private key."""
    certificate_key_file_password: str | None = None
    """``tlsCertificateKeyFilePassword``: decrypts the private key in ``certificate_key_file``."""
    insecure: bool = False
    """``tlsInsecure``: skip certificate and hostname verification."""
    allow_invalid_hostnames: bool = False
    """``tlsAllowInvalidHostnames``."""
    allow_invalid_certificates: bool = False
    """``tlsAllowInvalidCertificates``."""
    disable_ocsp_endpoint_check: bool = False
    """``tlsDisableOCSPEndpointCheck``: accepted; nothing to disable (see the module documentation)."""
    disable_certificate_revocation_check: bool = False
    """``tlsDisableCertificateRevocationCheck``: accepted; nothing to disable (see the module documentation)."""

    @property
    def verifies_certificates(self) -> bool:
        return not (self.insecure or self.allow_invalid_certificates)

    @property
    def verifies_hostnames(self) -> bool:
        return self.verifies_certificates and not self.allow_invalid_hostnames


def create_ssl_context(options: TLSOptions) -> ssl.SSLContext:
    """A client-side ``SSLContext`` for ``options``; build it once per client and share it by every connection.

    File problems (missing file, bad PEM, wrong key password) raise ``ConfigurationError`` naming the option.
    Loading the files reads the disk, so call this while setting a client up, not on each connection.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if options.verifies_certificates:
        if options.ca_file is not None:
            try:
                context.load_verify_locations(cafile=options.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigurationError(f"tlsCAFile {options.ca_file!r} cannot be loaded: {exc}") from exc
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if options.certificate_key_file is not None:
        try:
            context.load_cert_chain(
                options.certificate_key_file, password=options.certificate_key_file_password
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"tlsCertificateKeyFile {options.certificate_key_file!r} cannot be loaded "
                f"(check the file and tlsCertificateKeyFilePassword): {exc}"
            ) from exc
    # check_hostname must be off before verify_mode may be lowered.
    context.check_hostname = options.verifies_hostnames
    context.verify_mode = ssl.CERT_REQUIRED if options.verifies_certificates else ssl.CERT_NONE
    return context
