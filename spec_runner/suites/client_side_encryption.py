"""The client-side encryption specification's unified tests (``tests/unified``), against the server:
explicit encryption and key management run with the ``mongio[encryption]`` extra; what needs automatic
encryption, a cloud KMS or KMIP server, crypt_shared or server-side Queryable Encryption is skipped by the
skip list, which names what it needs. The ``tests/legacy`` files all configure automatic encryption
(``autoEncryptOpts``), which mongio does not have yet: they are not collected."""

from __future__ import annotations

from spec_runner.suites._unified_support import unified_suite

SUITE = unified_suite("client-side-encryption", directories=["unified"])
