"""Client options: keyword arguments over the connection string, typed values, credentials, TLS."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from mongio import MongoClient
from mongio.driver_info import DriverInfo
from mongio.errors import ConfigurationError, InvalidOptionValueError, InvalidURI
from mongio.options import (
    ClientOptions,
    ConfigurationWarning,
    ReadConcern,
    ReadPreference,
    SecondaryPreferred,
    WriteConcern,
)
from mongio.options.uri_options import URIOptions


def build(host: object = None, **kwargs: object) -> ClientOptions:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigurationWarning)
        return ClientOptions.from_uri(host, **kwargs)  # type: ignore[arg-type]


def test_defaults() -> None:
    options = build()
    assert options.seeds == (("localhost", 27017),)
    assert options.credential is None
    assert options.tls is None
    assert options.max_pool_size == 100 and options.min_pool_size == 0
    assert options.retry_reads and options.retry_writes
    assert options.read_preference == ReadPreference.PRIMARY
    assert options.write_concern == WriteConcern() and options.read_concern == ReadConcern()
    assert options.server_selection_timeout == 30.0
    assert options.max_adaptive_retries == 2 and not options.enable_overload_retargeting
    assert not options.adaptive_retries


@pytest.mark.parametrize("key", ["maxPoolSize", "maxpoolsize", "MAXPOOLSIZE"])
def test_keyword_wins_over_uri_whatever_its_case(key: str) -> None:
    options = build("mongodb://h/?maxPoolSize=10&replicaSet=a", **{key: 5}, replicaset="b")
    assert options.max_pool_size == 5
    assert options.replica_set == "b"
    assert options.options["maxPoolSize"] == 5


def test_merged_options_replace_the_entry_an_alias_or_other_case_names() -> None:
    given = URIOptions({"tls": False, "maxPoolSize": 10, "replicaSet": "a"})
    merged = given.merged({"SSL": True, "maxpoolsize": 5})
    assert dict(merged) == {"tls": True, "maxPoolSize": 5, "replicaSet": "a"}
    assert dict(given) == {"tls": False, "maxPoolSize": 10, "replicaSet": "a"}  # the original is left as it was


def test_keyword_list_replaces_uri_list() -> None:
    options = build(
        "mongodb://h/?readPreference=secondary&readPreferenceTags=dc:ny&readPreferenceTags=",
        readPreferenceTags=[{"dc": "sf"}],
    )
    assert options.read_preference.tag_sets == [{"dc": "sf"}]


def test_keyword_values_are_typed_and_converted() -> None:
    options = build(
        "mongodb://h",
        connectTimeoutMS=1500,
        socketTimeoutMS=None,
        serverSelectionTimeoutMS="2500",
        compressors=["zstd", "snappy"],
        w="majority",
        wTimeoutMS=100,
        j=True,
        readConcernLevel="majority",
        timeoutMS=0,
        maxAdaptiveRetries=4,
        enableOverloadRetargeting=True,
        appname="app",
    )
    assert options.connect_timeout == 1.5
    assert options.socket_timeout is None
    assert options.server_selection_timeout == 2.5
    assert options.compressors == ("zstd", "snappy")
    assert options.write_concern.document == {"w": "majority", "wtimeout": 100, "j": True}
    assert options.read_concern.document == {"level": "majority"}
    assert options.timeout_ms == 0
    assert options.max_adaptive_retries == 4 and options.enable_overload_retargeting
    assert options.appname == "app"


def test_connect_timeout_none_means_no_timeout() -> None:
    assert build("mongodb://h/?connectTimeoutMS=5000", connectTimeoutMS=None).connect_timeout is None
    assert build("mongodb://h/?connectTimeoutMS=0").connect_timeout is None
    assert build("mongodb://h").connect_timeout == 20.0


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"maxPoolSize": -1}, "maxPoolSize: -1"),
        ({"maxPoolSize": True}, "maxPoolSize: True"),
        ({"retryWrites": "maybe"}, "retryWrites: 'maybe'"),
        ({"heartbeatFrequencyMS": 100}, "heartbeatFrequencyMS: 100"),
        ({"readPreference": "closest"}, "readPreference: 'closest'"),
        ({"w": -2}, "w: -2"),
        ({"zlibCompressionLevel": 12}, "zlibCompressionLevel: 12"),
        ({"notAnOption": 1}, "Unknown option: notAnOption."),
    ],
)
def test_invalid_keywords_raise_naming_option_and_value(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        build("mongodb://h", **kwargs)
    assert fragment in str(info.value)


def test_keyword_combinations_are_checked_with_the_uri() -> None:
    with pytest.raises(ConfigurationError, match="directConnection=true"):
        build("mongodb://a,b", directConnection=True)
    with pytest.raises(ConfigurationError, match="replicaSet"):
        build("mongodb://a/?replicaSet=rs", loadBalanced=True)
    with pytest.raises(ConfigurationError, match="tls and ssl"):
        build("mongodb://a", tls=True, ssl=False)


def test_hosts_and_port_arguments() -> None:
    assert build("db1,db2:27018", port=27020).seeds == (("db1", 27020), ("db2", 27018))
    assert build(["mongodb://A.example.com", "b.example.com"]).seeds == (
        ("a.example.com", 27017),
        ("b.example.com", 27017),
    )
    with pytest.raises(ConfigurationError, match="port"):
        build("h", port=0)
    # PyMongo raises InvalidURI for another scheme; ported except clauses catch it by that name
    for host in ("http://localhost", ["mongodb://a", "redis://b"]):
        with pytest.raises(InvalidURI, match="scheme"):
            build(host)


def test_credentials_from_uri_and_keywords() -> None:
    options = build("mongodb://alice@h/inventory", password="secret")
    assert options.credential is not None
    assert (options.credential.username, options.credential.password) == ("alice", "secret")
    assert options.credential.source == "inventory"
    assert options.credential.mechanism == "DEFAULT"
    with pytest.raises(ConfigurationError, match="password is required for user 'alice'"):
        build("mongodb://alice@h")
    assert build("mongodb://h/?authSource=foo").credential is None
    options = build(
        "mongodb://h", username="bob", password="pw", authSource="$external", authMechanism="PLAIN"
    )
    assert options.credential is not None and options.credential.source == "$external"


def test_credential_repr_hides_secrets() -> None:
    options = build("mongodb://alice:hunter2@h")
    assert "hunter2" not in repr(options.credential)
    assert "hunter2" not in repr(options)


@pytest.mark.parametrize(
    ("uri", "kwargs", "fragment"),
    [
        ("mongodb://u:p@h/?authMechanism=MONGODB-X509", {}, "password cannot be used"),
        ("mongodb://h/?authMechanism=SCRAM-SHA-256", {}, "username is required"),
        (
            "mongodb://u@h/?authMechanism=GSSAPI&authSource=admin",
            {},
            "authSource must be $external, not 'admin'",
        ),
        ("mongodb://u:p@h/?authMechanismProperties=SERVICE_NAME:x", {}, "'SERVICE_NAME'"),
        (
            "mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:gcp",
            {},
            "TOKEN_RESOURCE",
        ),
        ("mongodb://u:p@h/?authMechanism=MONGODB-AWS", {}, "AWS"),
    ],
)
def test_credential_rules(uri: str, kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        build(uri, **kwargs)
    assert fragment in str(info.value)


def test_oidc_callback_as_keyword_property() -> None:
    def callback(*args: object) -> None:
        return None

    options = build(
        "mongodb://h/?authMechanism=MONGODB-OIDC", authMechanismProperties={"oidc_human_callback": callback}
    )
    assert options.credential is not None
    props = options.credential.mechanism_properties
    assert props["OIDC_HUMAN_CALLBACK"] is callback
    assert "*.mongodb.net" in props["ALLOWED_HOSTS"]
    with pytest.raises(ConfigurationError, match="ENVIRONMENT=test cannot be used with OIDC_CALLBACK"):
        build(
            "mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test",
            authMechanismProperties={"ENVIRONMENT": "test", "OIDC_CALLBACK": callback},
        )


def test_gssapi_defaults_and_canonicalization() -> None:
    options = build(
        "mongodb://u%40REALM@h/?authMechanism=GSSAPI&authMechanismProperties=CANONICALIZE_HOST_NAME:true"
    )
    assert options.credential is not None
    assert dict(options.credential.mechanism_properties) == {
        "SERVICE_NAME": "mongodb",
        "CANONICALIZE_HOST_NAME": "forwardAndReverse",
    }


def test_tls_enabling_rules() -> None:
    assert build("mongodb://h").tls is None
    assert build("mongodb://h/?tls=true").tls is not None
    implicit = build("mongodb://h/?tlsCAFile=ca.pem")
    assert implicit.tls is not None and implicit.tls.ca_file == "ca.pem"
    assert build("mongodb+srv://c.example.com").tls is not None
    assert build("mongodb+srv://c.example.com/?tls=false").tls is None
    assert build("mongodb+srv://c.example.com", tls=False).tls is None
    insecure = build("mongodb://h/?tlsInsecure=true").tls
    assert insecure is not None and insecure.allow_invalid_certificates and insecure.allow_invalid_hostnames
    assert not insecure.verifies_certificates


def test_read_preference_from_options_and_object() -> None:
    options = build(
        "mongodb://h/?readPreference=secondaryPreferred&maxStalenessSeconds=120&readPreferenceTags=dc:ny"
    )
    assert options.read_preference == SecondaryPreferred(tag_sets=[{"dc": "ny"}], max_staleness=120)
    assert options.read_preference.document == {
        "mode": "secondaryPreferred",
        "tags": [{"dc": "ny"}],
        "maxStalenessSeconds": 120,
    }
    chosen = build("mongodb://h/?readPreference=secondary", read_preference=ReadPreference.NEAREST)
    assert chosen.read_preference is ReadPreference.NEAREST
    with pytest.raises(ConfigurationError, match="read_preference"):
        build("mongodb://h", read_preference="nearest")


@pytest.mark.parametrize(
    ("uri", "kwargs", "refused", "missing"),
    [
        ("mongodb://h/?serverSelectionTryOnce=true", {}, "serverSelectionTryOnce=true", "single-threaded"),
        ("mongodb://h", {"serverSelectionTryOnce": True}, "serverSelectionTryOnce=true", "single-threaded"),
    ],
)
def test_unsupported_options_are_refused_naming_what_mongio_lacks(
    uri: str, kwargs: dict[str, Any], refused: str, missing: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build(uri, **kwargs)
    assert f"{refused} is not supported" in str(caught.value)
    assert missing in str(caught.value)
    with pytest.raises(ConfigurationError, match=refused):
        MongoClient(uri, **kwargs)


def test_what_mongio_does_without_a_refused_option_is_still_accepted() -> None:
    # None is PyMongo's default for auto_encryption_opts; serverSelectionTryOnce=false is what mongio does.
    assert build("mongodb://h", auto_encryption_opts=None).extras.get("auto_encryption_opts") is None
    assert build("mongodb://h/?serverSelectionTryOnce=false").options["serverSelectionTryOnce"] is False


@pytest.mark.parametrize(
    ("uri", "fragment"),
    [
        ("mongodb://h/?tlsInsecure=true&tlsDisableOCSPEndpointCheck=true", "cannot both be given"),
    ],
)
def test_refused_options_are_validated_before_the_refusal(uri: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        build(uri)


def test_uri_warnings_are_reported_once_and_issued() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = ClientOptions.from_uri("mongodb://h/?foo=1", wtimeout=5)
    issued = [str(w.message) for w in caught if issubclass(w.category, ConfigurationWarning)]
    assert issued == list(options.warnings)
    assert len(issued) == 2
    assert options.write_concern.wtimeout == 5


def test_srv_needs_resolution_before_seeds() -> None:
    options = build("mongodb+srv://cluster.example.com/?srvMaxHosts=2")
    assert options.needs_resolution and options.seeds == ()
    assert options.srv_max_hosts == 2
    with pytest.raises(InvalidURI):
        build("mongodb+srv://cluster.example.com/?srvMaxHosts=2&replicaSet=rs")


def test_the_clients_options_pass_to_its_databases_but_not_its_timeout() -> None:
    client = MongoClient("mongodb://h/?readPreference=secondary&w=2&readConcernLevel=majority&timeoutMS=500")
    database = client.shop
    assert database.read_preference == client.read_preference and client.read_preference.mongos_mode == "secondary"
    assert database.write_concern == client.write_concern and client.write_concern.document == {"w": 2}
    assert database.read_concern == client.read_concern and client.read_concern.level == "majority"
    # The client's timeoutMS applies after a session's default_timeout_ms, so a database does not copy it.
    assert database.timeout is None
    stream = client.watch()
    assert type(stream).__name__ == "ClusterChangeStream"
    assert repr(stream).startswith("<ClusterChangeStream admin ")


@pytest.mark.parametrize(
    "option",
    [
        {"maxPoolSize": -1},
        {"maxPoolSize": "x"},
        {"minPoolSize": -3},
        {"w": -1},
        {"retryWrites": "maybe"},
        {"readPreference": "fastest"},
        {"localThresholdMS": -1},
    ],
)
def test_an_invalid_option_value_is_a_value_error_as_in_pymongo(option: dict[str, Any]) -> None:
    """PyMongo raises ValueError for these: mongio's error is that and a ConfigurationError, so both except
    clauses catch it."""
    from pymongo import AsyncMongoClient as PyMongoClient

    with pytest.raises(ValueError):
        PyMongoClient("mongodb://h/", connect=False, **option)
    with pytest.raises(InvalidOptionValueError) as raised:
        MongoClient("mongodb://h/", connect=False, **option)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, ConfigurationError)
    assert str(raised.value).startswith(f"Invalid value for {next(iter(option))}: {next(iter(option.values()))!r}")


def test_an_unknown_option_is_still_only_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError) as raised:
        MongoClient("mongodb://h/", connect=False, maxPoolSise=5)
    assert not isinstance(raised.value, ValueError)


def test_pool_options_give_the_pool_settings_under_pymongos_names() -> None:
    pool = build(
        "mongodb://h/?maxPoolSize=7&minPoolSize=2&maxIdleTimeMS=1500&waitQueueTimeoutMS=250&connectTimeoutMS=400"
        "&socketTimeoutMS=900&maxConnecting=3&appname=shop&tlsAllowInvalidHostnames=true"
    ).pool_options
    assert (pool.max_pool_size, pool.min_pool_size, pool.max_connecting) == (7, 2, 3)
    assert (pool.max_idle_time_seconds, pool.wait_queue_timeout) == (1.5, 0.25)
    assert (pool.connect_timeout, pool.socket_timeout) == (0.4, 0.9)
    assert pool.appname == "shop" and pool.tls_allow_invalid_hostnames is True
    assert pool.non_default_options == {
        "maxPoolSize": 7,
        "minPoolSize": 2,
        "maxIdleTimeMS": 1500.0,
        "waitQueueTimeoutMS": 250.0,
        "maxConnecting": 3,
    }
    defaults = build("mongodb://h").pool_options
    assert (defaults.max_pool_size, defaults.min_pool_size, defaults.max_idle_time_seconds) == (100, 0, None)
    assert defaults.non_default_options == {} and defaults.tls_allow_invalid_hostnames is False
    assert build("mongodb://h/?maxPoolSize=0").pool_options.max_pool_size == float("inf")


def test_pool_options_metadata_is_the_handshakes_client_document_appends_included() -> None:
    client = MongoClient("mongodb://h", appname="shop", connect=False)
    metadata = client.options.pool_options.metadata
    assert metadata["application"] == {"name": "shop"}
    assert metadata["driver"]["name"] == "mongio"
    client.append_metadata(DriverInfo("Wrapper", "2.0"))
    assert client.options.pool_options.metadata["driver"]["name"] == "mongio|Wrapper"
    # A copy each time: changing it changes nothing the handshakes send.
    client.options.pool_options.metadata["driver"]["name"] = "changed"
    assert client.options.pool_options.metadata["driver"]["name"] == "mongio|Wrapper"


def test_a_driver_that_is_not_driver_info_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="DriverInfo"):
        MongoClient("mongodb://h", driver="Wrapper", connect=False)


def test_the_snake_case_keywords_pymongo_takes_for_the_overload_options() -> None:
    options = build(max_adaptive_retries=5, enable_overload_retargeting=True)
    assert (options.max_adaptive_retries, options.enable_overload_retargeting) == (5, True)
    assert build(maxAdaptiveRetries=4).max_adaptive_retries == 4
    with pytest.raises(ConfigurationError, match="Unknown option"):
        build(max_pool_size=5)


@pytest.mark.parametrize(("given", "taken"), [(True, True), (False, False), ("true", True), ("False", False)])
def test_tz_aware_takes_a_boolean_or_its_string(given: object, taken: bool) -> None:
    assert build(tz_aware=given).extras["tz_aware"] is taken


@pytest.mark.parametrize("given", ["foo", 1, "yes"])
def test_tz_aware_refuses_anything_else_with_a_value_error(given: object) -> None:
    with pytest.raises(ValueError, match="tz_aware must be True or False"):
        MongoClient(tz_aware=given, connect=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(("host", "port"), [(1, None), (1.5, None), ("localhost", "27017"), ("localhost", 1.5)])
def test_a_host_or_port_of_the_wrong_type_is_a_type_error(host: Any, port: Any) -> None:
    with pytest.raises(TypeError, match="must be"):
        build(host, port=port)


def test_an_empty_host_list_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="at least one host"):
        build([])
    assert build(None).seeds == (("localhost", 27017),)


def test_security_options_contradicting_each_other_are_an_invalid_uri() -> None:
    with pytest.raises(InvalidURI, match="tls=true but the tls"):
        build("mongodb://h/?ssl=true", tls=False)
    with pytest.raises(InvalidURI, match="tlsInsecure and tlsAllowInvalidHostnames"):
        build("mongodb://h/?tlsInsecure=true", tlsAllowInvalidHostnames=True)
    with pytest.raises(InvalidURI, match="tls and ssl must agree"):
        build(ssl=True, tls=False)
    assert build("mongodb://h/?ssl=false", tls=False).tls is None


@pytest.mark.parametrize("typo", ["auth", "AUTH"])
def test_an_unknown_keyword_suggests_the_nearest_option_names(typo: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build(**{typo: "standard"})
    assert str(raised.value) == (
        f"Unknown option: {typo}. Did you mean one of (authsource, authmechanism, timeoutms) "
        "or maybe a camelCase version of one? Refer to docstring."
    )


def test_an_unknown_keyword_like_no_option_suggests_nothing_and_never_shows_its_value() -> None:
    with pytest.raises(ConfigurationError) as raised:
        build(zzzzzzzzzzzz="hunter2")
    assert str(raised.value) == "Unknown option: zzzzzzzzzzzz."


@pytest.mark.parametrize("host", ["h:1234567", "mongodb://h:65536/", "mongodb://a,h:0/"])
def test_a_port_out_of_range_is_both_invalid_uri_and_value_error(host: str) -> None:
    with pytest.raises(InvalidURI) as raised:
        build(host)
    assert isinstance(raised.value, ValueError)


def test_a_port_keyword_out_of_range_is_both_a_configuration_and_a_value_error() -> None:
    with pytest.raises(InvalidOptionValueError, match="between 1 and 65535"):
        build("h", port=70000)
