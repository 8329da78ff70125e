"""One table from every option a client accepts to the test that proves its effect, or to its refusal.

The options are taken from where the client takes them: the option table of the connection string
(``mongio.options.uri_options.OPTIONS`` and its aliases), PyMongo's keyword-only settings
(``mongio.options.client_options.KEYWORD_ONLY``) and the named parameters of ``MongoClient``. An option added
to any of them without a row here fails :func:`test_every_accepted_option_has_a_row`; a row naming a test
that does not exist fails :func:`test_every_row_names_a_collected_test`.

A :class:`Proven` row names a test in which a client built with the option behaves differently from one
without it (on the wire, in its pool, or in the values it returns). Some options are
accepted in one value and refused in another (``serverSelectionTryOnce``): their row proves the
accepted value's effect and its note says which value is refused.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from mongio import MongoClient
from mongio.options.client_options import KEYWORD_ONLY
from mongio.options.uri_options import ALIASES, DEPRECATED_ALIASES, OPTIONS, fold_case

ROOT = Path(__file__).resolve().parents[3]

EFFECTS = "tests/integration/api/test_option_effects.py"
TLS = "tests/integration/api/test_option_effects_tls.py"
SOCKS5 = "tests/integration/prose/test_socks5.py"
OCSP = "tests/integration/server/test_ocsp.py"


@dataclass(frozen=True)
class Proven:
    """The option has the effect its specification (or PyMongo) gives it; ``test`` shows it."""

    test: str
    note: str = ""


Row = Proven

OPTION_TABLE: dict[str, Row] = {
    # -- the connection string's options (also accepted as keywords) --
    "appname": Proven(f"{EFFECTS}::test_appname_and_driver_are_in_the_handshake"),
    "authMechanism": Proven(
        f"{EFFECTS}::test_credentials_mechanism_and_source_drive_the_authentication",
        "GSSAPI runs against a real KDC in tests/integration/server/test_auth_gssapi_kdc.py, MONGODB-AWS against "
        "loopback AWS endpoints in tests/unit/connection/test_auth_aws.py and MONGODB-OIDC against a loopback "
        "identity server in tests/unit/connection/test_auth_oidc_prose.py",
    ),
    "authMechanismProperties": Proven(
        "tests/integration/server/test_auth_gssapi_kdc.py::test_service_name_picks_the_service",
        "only GSSAPI, MONGODB-AWS and MONGODB-OIDC take properties (any other mechanism refuses them when the "
        "client is made); MONGODB-OIDC's ENVIRONMENT is proven in tests/unit/connection/"
        "test_auth_oidc_environments.py::test_azure_5_1_no_username_authenticates and MONGODB-AWS's "
        "AWS_CREDENTIAL_PROVIDER in tests/unit/connection/test_auth_aws.py::test_custom_provider_1_authenticates",
    ),
    "authSource": Proven(f"{EFFECTS}::test_credentials_mechanism_and_source_drive_the_authentication"),
    "compressors": Proven(f"{EFFECTS}::test_compressors_are_offered_and_used"),
    "connectTimeoutMS": Proven(
        f"{EFFECTS}::test_connect_timeout_bounds_a_handshake_the_server_never_answers"
    ),
    "directConnection": Proven(f"{EFFECTS}::test_direct_connection_talks_to_a_secondary_alone"),
    "heartbeatFrequencyMS": Proven(f"{EFFECTS}::test_heartbeat_frequency_sets_how_often_the_monitor_checks"),
    "journal": Proven(f"{EFFECTS}::test_write_concern_options_reach_the_write_command"),
    "loadBalanced": Proven(
        f"{EFFECTS}::test_load_balanced_says_so_in_the_handshake_and_makes_a_load_balanced_topology"
    ),
    "localThresholdMS": Proven(
        f"{EFFECTS}::test_local_threshold_decides_whether_a_slow_mongos_gets_operations"
    ),
    "maxIdleTimeMS": Proven(f"{EFFECTS}::test_max_idle_time_closes_a_connection_idle_for_longer"),
    "maxPoolSize": Proven(f"{EFFECTS}::test_max_pool_size_caps_the_connections_of_concurrent_operations"),
    "maxConnecting": Proven(f"{EFFECTS}::test_max_connecting_caps_the_connections_being_established_at_once"),
    "maxStalenessSeconds": Proven(f"{EFFECTS}::test_read_preference_options_reach_a_mongos"),
    "minPoolSize": Proven(f"{EFFECTS}::test_min_pool_size_opens_connections_before_any_operation"),
    "proxyHost": Proven(f"{SOCKS5}::test_readme_rows", "every connection goes through it, the name unresolved"),
    "proxyPort": Proven(f"{SOCKS5}::test_readme_rows", "the README's two proxies differ by their port"),
    "proxyUsername": Proven(f"{SOCKS5}::test_readme_rows", "rows 5, 8 and 10: wrong and right credentials"),
    "proxyPassword": Proven(f"{SOCKS5}::test_readme_rows", "rows 5, 8 and 10: wrong and right credentials"),
    "readConcernLevel": Proven(f"{EFFECTS}::test_read_concern_level_reaches_the_read_command"),
    "readPreference": Proven(f"{EFFECTS}::test_read_preference_options_reach_a_mongos"),
    "readPreferenceTags": Proven(f"{EFFECTS}::test_read_preference_options_reach_a_mongos"),
    "replicaSet": Proven(f"{EFFECTS}::test_replica_set_name_removes_a_member_of_another_set"),
    "retryReads": Proven(
        f"{EFFECTS}::test_retry_reads_decides_whether_a_read_is_sent_again_after_a_network_error"
    ),
    "retryWrites": Proven(
        f"{EFFECTS}::test_retry_writes_decides_whether_a_write_carries_a_transaction_number"
    ),
    "serverMonitoringMode": Proven(f"{EFFECTS}::test_server_monitoring_mode_chooses_streaming_or_polling"),
    "serverSelectionTimeoutMS": Proven(
        f"{EFFECTS}::test_server_selection_timeout_bounds_the_wait_for_a_suitable_server"
    ),
    "serverSelectionTryOnce": Proven(
        f"{EFFECTS}::test_selection_waits_for_a_server_that_answers_late_as_server_selection_try_once_false_asks",
        "false is what mongio does; true (the single-threaded drivers' mode) is refused",
    ),
    "socketTimeoutMS": Proven(f"{EFFECTS}::test_socket_timeout_ends_a_read_the_server_never_answers"),
    "srvMaxHosts": Proven("tests/unit/options/test_srv.py::test_srv_max_hosts_applies_to_client_seeds"),
    "srvServiceName": Proven("tests/unit/options/test_srv.py::test_srv_service_name_names_the_records_looked_up"),
    "tls": Proven(f"{TLS}::test_tls_and_its_alias_ssl_turn_encryption_on"),
    "tlsAllowInvalidCertificates": Proven(
        f"{TLS}::test_allow_invalid_certificates_and_insecure_accept_an_untrusted_server"
    ),
    "tlsAllowInvalidHostnames": Proven(
        f"{TLS}::test_allow_invalid_hostnames_accepts_a_trusted_certificate_for_another_name"
    ),
    "tlsCAFile": Proven(f"{TLS}::test_ca_file_decides_which_servers_are_trusted"),
    "tlsCertificateKeyFile": Proven(
        f"{TLS}::test_certificate_key_file_and_its_password_present_the_client_certificate"
    ),
    "tlsCertificateKeyFilePassword": Proven(
        f"{TLS}::test_certificate_key_file_and_its_password_present_the_client_certificate"
    ),
    "tlsCRLFile": Proven(f"{TLS}::test_crl_file_refuses_a_revoked_server_certificate"),
    "tlsDisableCertificateRevocationCheck": Proven(
        f"{OCSP}::test_the_options_turn_the_responder_check_off",
        "true: a revoked certificate is accepted and no responder is asked; false: it is refused",
    ),
    "tlsDisableOCSPEndpointCheck": Proven(
        f"{OCSP}::test_the_options_turn_the_responder_check_off",
        "true: a revoked certificate is accepted and no responder is asked; false: it is refused",
    ),
    "tlsInsecure": Proven(f"{TLS}::test_allow_invalid_certificates_and_insecure_accept_an_untrusted_server"),
    "w": Proven(f"{EFFECTS}::test_write_concern_options_reach_the_write_command"),
    "waitQueueTimeoutMS": Proven(f"{EFFECTS}::test_wait_queue_timeout_ends_a_wait_for_a_busy_pool"),
    "wTimeoutMS": Proven(f"{EFFECTS}::test_write_concern_options_reach_the_write_command"),
    "zlibCompressionLevel": Proven(f"{EFFECTS}::test_zlib_compression_level_changes_the_bytes_sent"),
    "timeoutMS": Proven("tests/integration/api/test_client_options.py::test_csot_sends_max_time_ms"),
    "maxAdaptiveRetries": Proven(
        "tests/integration/prose/test_backpressure.py::"
        "test_prose_3_and_4_overload_errors_are_retried_max_adaptive_retries_times"
    ),
    "enableOverloadRetargeting": Proven(
        "tests/integration/prose/test_retry_topologies.py::test_reads_prose_3_replica_set_retargeting"
    ),
    "adaptiveRetries": Proven(
        "tests/integration/prose/test_backpressure.py::test_overload_retries_backoffs_and_token_bucket_match_the_specification"
    ),
    "pymongoTypes": Proven(
        "tests/integration/api/test_pymongo_types_server.py::test_a_typed_client_reads_and_writes_pymongo_values"
    ),
    "fsync": Proven(f"{EFFECTS}::test_write_concern_options_reach_the_write_command"),
    "uuidRepresentation": Proven(f"{EFFECTS}::test_uuid_representation_decides_how_a_uuid_is_sent"),
    # -- other spellings of the options above --
    "ssl": Proven(f"{TLS}::test_tls_and_its_alias_ssl_turn_encryption_on"),
    "j": Proven(f"{EFFECTS}::test_write_concern_options_reach_the_write_command"),
    "pymongo_types": Proven(
        "tests/unit/compat/test_pymongo_types.py::test_children_of_a_typed_client_stay_typed_whatever_options_they_are_given"
    ),
    "wtimeout": Proven(f"{EFFECTS}::test_write_concern_options_reach_the_write_command", "deprecated: warns"),
    "gssapiServiceName": Proven(
        "tests/integration/server/test_auth_gssapi_kdc.py::"
        "test_the_deprecated_gssapi_service_name_picks_the_service",
        "deprecated: warns, and becomes authMechanismProperties=SERVICE_NAME",
    ),
    # -- keyword-only settings --
    "username": Proven(f"{EFFECTS}::test_credentials_mechanism_and_source_drive_the_authentication"),
    "password": Proven(f"{EFFECTS}::test_credentials_mechanism_and_source_drive_the_authentication"),
    "document_class": Proven("tests/integration/api/test_client_options.py::test_document_class_and_tz_aware"),
    "tz_aware": Proven(f"{EFFECTS}::test_codec_keywords_shape_the_documents_returned"),
    "tzinfo": Proven(f"{EFFECTS}::test_codec_keywords_shape_the_documents_returned"),
    "connect": Proven(
        f"{EFFECTS}::test_connect_true_starts_monitoring_before_any_operation",
        "connect=False leaves every connection to the first operation: "
        "test_connect_false_leaves_every_connection_to_the_first_operation",
    ),
    "type_registry": Proven(f"{EFFECTS}::test_type_registry_encodes_the_applications_types"),
    "datetime_conversion": Proven(f"{EFFECTS}::test_codec_keywords_shape_the_documents_returned"),
    "unicode_decode_error_handler": Proven(
        f"{EFFECTS}::test_unicode_decode_error_handler_decides_what_invalid_utf8_becomes"
    ),
    "event_listeners": Proven(
        "tests/integration/api/test_client_options.py::test_event_listeners_reach_commands_pools_and_sdam"
    ),
    "server_api": Proven(
        "tests/integration/api/test_server_api.py::test_every_command_carries_the_declared_api_version"
    ),
    "driver": Proven(f"{EFFECTS}::test_appname_and_driver_are_in_the_handshake"),
    "auto_encryption_opts": Proven(
        "tests/integration/prose/test_encryption_automatic.py::test_insert_encrypts_and_find_decrypts"
    ),
    "server_selector": Proven(f"{EFFECTS}::test_server_selector_filters_every_selection"),
    "read_preference": Proven(f"{EFFECTS}::test_read_preference_options_reach_a_mongos"),
    "tracing": Proven("tests/integration/api/test_tracing.py::test_bulk_write_is_one_operation"),
}


def accepted_options() -> dict[str, str]:
    """Every option name a client accepts, by case-folded name, from the registries the client reads."""
    names = [spec.name for spec in OPTIONS.values()]
    names += list(ALIASES) + list(DEPRECATED_ALIASES) + list(KEYWORD_ONLY.values())
    parameters = inspect.signature(MongoClient.__init__).parameters.values()
    names += [
        p.name
        for p in parameters
        if p.kind is p.POSITIONAL_OR_KEYWORD and p.name not in ("self", "host", "port")
    ]
    return {fold_case(name): name for name in names}


def test_every_accepted_option_has_a_row() -> None:
    rows = {fold_case(name) for name in OPTION_TABLE}
    assert len(rows) == len(OPTION_TABLE), "two rows name the same option"
    accepted = accepted_options()
    missing = sorted(accepted[name] for name in accepted.keys() - rows)
    extra = sorted(name for name in OPTION_TABLE if fold_case(name) not in accepted)
    assert not missing, f"options accepted without a row in OPTION_TABLE: {missing}"
    assert not extra, f"rows for options the client does not accept: {extra}"


@cache
def defined_tests(path: str) -> frozenset[str]:
    """The names of the test functions defined at the top level of ``path`` (what pytest collects there)."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")
    )


@pytest.mark.parametrize("option", sorted(OPTION_TABLE))
def test_every_row_names_a_collected_test(option: str) -> None:
    path, separator, name = OPTION_TABLE[option].test.partition("::")
    assert separator and path.startswith("tests/") and path.endswith(".py"), OPTION_TABLE[option]
    assert (ROOT / path).is_file(), f"{option}: no file {path}"
    assert name in defined_tests(path), f"{option}: {path} defines no test {name}"


