"""Building the ``ssl.SSLContext`` for TLS connections from the ``tls*`` options.

What each relaxation does, exactly:

- ``tlsAllowInvalidHostnames``: the server certificate must still chain to a trusted CA, but its names are not
  compared with the host connected to.
- ``tlsAllowInvalidCertificates``: the server certificate is not verified at all (which implies no hostname
  check either).
- ``tlsInsecure``: both of the above.
- ``tlsCRLFile``: the server certificate is checked against that revocation list during the handshake.
- OCSP: after the handshake, the server certificate's OCSP responder is asked whether it is revoked
  (:mod:`mongio.connection.ocsp`, with ``cryptography``), unless ``tlsDisableOCSPEndpointCheck`` or
  ``tlsDisableCertificateRevocationCheck`` is true or the certificates are not verified at all. Python's
  ``ssl`` module can neither ask for nor read a stapled OCSP response; docs/ocsp.md says what is checked.

The server name is always sent (SNI) so that proxies and multi-tenant front ends can route the connection,
even when hostname verification is off.
"""

from __future__ import annotations

import importlib.util
import ssl
import warnings
from typing import TYPE_CHECKING

from mongio.errors import ConfigurationError
from mongio.options.tls_options import TLSOptions
from mongio.options.uri_options import ConfigurationWarning

if TYPE_CHECKING:
    from mongio.connection.ocsp import RevocationChecker

__all__ = ["TLSOptions", "create_revocation_checker", "create_ssl_context"]

OCSP_EXTRA_MISSING = (
    "the OCSP check of the server certificate's revocation needs the cryptography package: "
    "pip install 'mongio[ocsp]'"
)


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
        if options.crl_file is not None:
            try:
                context.load_verify_locations(cafile=options.crl_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigurationError(f"tlsCRLFile {options.crl_file!r} cannot be loaded: {exc}") from exc
            context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if options.certificate_key_file is not None:
        try:
            # A callable, never None: without a password OpenSSL would prompt on the terminal, blocking.
            password = options.certificate_key_file_password or ""
            context.load_cert_chain(options.certificate_key_file, password=lambda: password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"tlsCertificateKeyFile {options.certificate_key_file!r} cannot be loaded "
                f"(check the file and tlsCertificateKeyFilePassword): {exc}"
            ) from exc
    # check_hostname must be off before verify_mode may be lowered.
    context.check_hostname = options.verifies_hostnames
    context.verify_mode = ssl.CERT_REQUIRED if options.verifies_certificates else ssl.CERT_NONE
    return context


def create_revocation_checker(options: TLSOptions, context: ssl.SSLContext) -> RevocationChecker | None:
    """The OCSP check for a client with ``options`` and its ``context``, or None when it checks no revocation.

    Without ``cryptography`` installed, a check asked for explicitly (``tlsDisableOCSPEndpointCheck=false``
    or ``tlsDisableCertificateRevocationCheck=false``) raises ``ConfigurationError``; the default one is not
    made, with a ``ConfigurationWarning`` saying so (the OCSP specification enables it only where possible).
    """
    if not options.checks_ocsp_endpoint:
        return None
    if importlib.util.find_spec("cryptography") is None:
        if options.ocsp_check_requested:
            raise ConfigurationError(f"OCSP cannot be checked: {OCSP_EXTRA_MISSING}")
        warnings.warn(
            f"the server certificates' revocation is not checked: {OCSP_EXTRA_MISSING}, or set "
            "tlsDisableOCSPEndpointCheck=true to say the check is not wanted",
            ConfigurationWarning,
            stacklevel=3,
        )
        return None
    from mongio.connection.ocsp import RevocationChecker  # cryptography: only for clients that check

    return RevocationChecker(context.get_ca_certs(binary_form=True))
