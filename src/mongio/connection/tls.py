"""Building the ``ssl.SSLContext`` for TLS connections from the ``tls*`` options.

What each relaxation does, exactly:

- ``tlsAllowInvalidHostnames``: the server certificate must still chain to a trusted CA, but its names are not
  compared with the host connected to.
- ``tlsAllowInvalidCertificates``: the server certificate is not verified at all (which implies no hostname
  check either).
- ``tlsInsecure``: both of the above.
- ``tlsCRLFile``: the server certificate is checked against that revocation list, the only revocation check
  mongio makes. OCSP is not supported (Python's ``ssl`` module neither contacts OCSP responders nor checks
  stapled OCSP responses), so ``tlsDisableOCSPEndpointCheck`` and ``tlsDisableCertificateRevocationCheck``
  are refused when the client is made (``mongio.options.client_options.UNSUPPORTED``).

The server name is always sent (SNI) so that proxies and multi-tenant front ends can route the connection,
even when hostname verification is off.
"""

from __future__ import annotations

import ssl

from mongio.errors import ConfigurationError
from mongio.options.tls_options import TLSOptions

__all__ = ["TLSOptions", "create_ssl_context"]


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
