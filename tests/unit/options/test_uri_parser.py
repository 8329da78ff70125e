"""The connection string parser: parts, hosts, decoding, options, warnings and error messages."""

from __future__ import annotations

import warnings
from typing import Literal
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mongio.errors import InvalidURI
from mongio.options import ConfigurationWarning, parse_uri
from mongio.options.uri_options import canonical_name
from mongio.options.uri_parser import parse_host

# Unicode category Cs (lone surrogates): strings holding one cannot be encoded as UTF-8.
SURROGATES: tuple[Literal["Cs"]] = ("Cs",)


def quiet(uri: str, **kw: object):  # type: ignore[no-untyped-def]
    return parse_uri(uri, warn=False, **kw)  # type: ignore[arg-type]


# -- hosts ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "host", "port", "kind", "address"),
    [
        ("Example.COM:27020", "Example.COM", 27020, "hostname", ("example.com", 27020)),
        ("127.0.0.1", "127.0.0.1", None, "ipv4", ("127.0.0.1", 27017)),
        ("256.0.0.1", "256.0.0.1", None, "hostname", ("256.0.0.1", 27017)),
        ("[::1]:27018", "::1", 27018, "ip_literal", ("::1", 27018)),
        ("[fe80::1%25eth0]", "fe80::1%eth0", None, "ip_literal", ("fe80::1%eth0", 27017)),
        (
            "%2Ftmp%2Fmongodb-27017.sock",
            "/tmp/mongodb-27017.sock",
            None,
            "unix",
            ("/tmp/mongodb-27017.sock", None),
        ),
        ("rel%2Fa.sock", "rel/a.sock", None, "unix", ("rel/a.sock", None)),
        ("mongodb-27017.sock", "mongodb-27017.sock", None, "hostname", ("mongodb-27017.sock", 27017)),
    ],
)
def test_host_kinds(
    entry: str, host: str, port: int | None, kind: str, address: tuple[str, int | None]
) -> None:
    spec = parse_host(entry)
    assert (spec.host, spec.port, spec.type) == (host, port, kind)
    assert spec.address == address


@pytest.mark.parametrize(
    ("uri", "fragment"),
    [
        ("mongodb://localhost:0", "port 0"),
        ("mongodb://localhost:65536", "65536"),
        # Without an "@", what follows the first ":" may be a password whose host was forgotten: hidden.
        ("mongodb://localhost:x1", "port '***' of host 'localhost:***' is not a number"),
        ("mongodb://alice@localhost:x1", "'x1'"),
        ("mongodb://[::1", "closing"),
        ("mongodb://[nothex]:1", "IPv6"),
        ("mongodb://::1", "brackets"),
        ("mongodb://a,,b", "empty host"),
        ("mongodb://%2Ftmp%2Fmongodb", "must end in '.sock'"),
        ("mongodb://", "no host"),
        ("http://localhost", "scheme"),
    ],
)
def test_bad_hosts_name_the_problem(uri: str, fragment: str) -> None:
    with pytest.raises(InvalidURI, match=None) as info:
        quiet(uri)
    assert fragment in str(info.value)


def test_srv_takes_one_host_name_without_port() -> None:
    assert quiet("mongodb+srv://cluster0.example.com/db").srv_host == "cluster0.example.com"
    assert quiet("mongodb+srv://localhost").seeds == ()
    for uri in (
        "mongodb+srv://a.example.com,b.example.com",
        "mongodb+srv://a.example.com:27017",
        "mongodb+srv://[::1]",
    ):
        with pytest.raises(InvalidURI):
            quiet(uri)


# -- user information and database ------------------------------------------------------------------------


def test_userinfo_and_database_are_decoded() -> None:
    parsed = quiet("mongodb://us%3Aer:p%40ss%2Fw@host/my%3Fdb.coll?w=1")
    assert (parsed.username, parsed.password) == ("us:er", "p@ss/w")
    assert parsed.database == "my?db.coll"
    assert parsed.default_database == "my?db"
    assert parsed.collection == "coll"
    assert parsed.userinfo_given


def test_plus_is_not_a_space() -> None:
    assert quiet("mongodb://a+b:c+d@host").username == "a+b"


@pytest.mark.parametrize(
    "uri",
    [
        "mongodb://alice:foo:bar@host",
        "mongodb://alice@@host",
        "mongodb://al%ce:x@host",
        "mongodb://al%zz@host",
        "mongodb://@host",
        "mongodb://:pw@host",
        "mongodb://host/db$name",
        "mongodb://host/a b",
    ],
)
def test_bad_userinfo_or_database(uri: str) -> None:
    with pytest.raises(InvalidURI):
        quiet(uri)


@given(
    user=st.text(st.characters(exclude_categories=SURROGATES), min_size=1, max_size=20),
    password=st.text(st.characters(exclude_categories=SURROGATES), max_size=20),
)
def test_encoded_credentials_round_trip(user: str, password: str) -> None:
    uri = f"mongodb://{quote(user, safe='')}:{quote(password, safe='')}@localhost/"
    parsed = quiet(uri)
    assert (parsed.username, parsed.password) == (user, password)


def test_options_without_slash_before_question_mark() -> None:
    parsed = quiet("mongodb://localhost?replicaSet=rs&appname=a/b")
    assert parsed.database is None
    assert parsed.options["replicaset"] == "rs"
    assert parsed.options["appName"] == "a/b"


# -- options -----------------------------------------------------------------------------------------------


def test_keys_are_case_insensitive_and_values_typed() -> None:
    parsed = quiet(
        "mongodb://h/?MAXPOOLSIZE=5&retrywrites=false&W=majority&readPreferenceTags=dc:ny,rack:1"
        "&readPreferenceTags=&compressors=zstd,bogus,zlib&readpreference=SECONDARYPREFERRED"
    )
    options = parsed.options
    assert options["maxPoolSize"] == 5
    assert options["retryWrites"] is False
    assert options["w"] == "majority"
    assert options["readPreferenceTags"] == [{"dc": "ny", "rack": "1"}, {}]
    assert options["compressors"] == ["zstd", "zlib"]
    assert options["readPreference"] == "secondaryPreferred"
    assert list(options) == [
        "maxPoolSize",
        "retryWrites",
        "w",
        "readPreferenceTags",
        "compressors",
        "readPreference",
    ]
    assert any("bogus" in message for message in parsed.warnings)


def test_ssl_is_tls_and_j_is_journal() -> None:
    parsed = quiet("mongodb://h/?ssl=true&j=true")
    assert parsed.options["tls"] is True and parsed.options["ssl"] is True
    assert parsed.options["journal"] is True
    assert parsed.warnings == ()


def test_tls_and_ssl_must_agree() -> None:
    with pytest.raises(InvalidURI, match="tls=false, ssl=true"):
        quiet("mongodb://h/?tls=false&ssl=true")


def test_invalid_values_warn_naming_option_and_value_and_are_ignored() -> None:
    parsed = quiet("mongodb://h/?connectTimeoutMS=soon&heartbeatFrequencyMS=499&journal=")
    assert "connectTimeoutMS" not in parsed.options
    assert "heartbeatFrequencyMS" not in parsed.options
    assert "journal" not in parsed.options
    assert any("connectTimeoutMS" in m and "'soon'" in m for m in parsed.warnings)
    assert any("heartbeatFrequencyMS" in m and "'499'" in m for m in parsed.warnings)
    assert len(parsed.warnings) == 3


def test_strict_turns_invalid_values_into_errors() -> None:
    with pytest.raises(InvalidURI, match=r"wTimeoutMS: '-500'"):
        quiet("mongodb://h/?wtimeoutMS=-500", strict=True)


def test_warnings_are_issued_with_the_project_category() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parsed = parse_uri("mongodb://h/?foo=bar&replicaSet=a&replicaSet=b")
    issued = [str(w.message) for w in caught if issubclass(w.category, ConfigurationWarning)]
    assert issued == list(parsed.warnings)
    assert any("'foo'" in m for m in issued)
    assert parsed.options["replicaSet"] == "b"


def test_deprecated_keys() -> None:
    parsed = quiet("mongodb://h/?wtimeout=5")
    assert parsed.options["wTimeoutMS"] == 5
    assert any("Deprecated key 'wtimeout'" in m for m in parsed.warnings)
    parsed = quiet("mongodb://h/?wtimeout=5&wTimeoutMS=10")
    assert parsed.options["wTimeoutMS"] == 10
    parsed = quiet("mongodb://u@h/?authMechanism=GSSAPI&gssapiServiceName=other")
    assert parsed.options["authMechanismProperties"] == {"SERVICE_NAME": "other"}


def test_alternative_booleans_are_deprecated_but_accepted() -> None:
    parsed = quiet("mongodb://h/?retryReads=no")
    assert parsed.options["retryReads"] is False
    assert any("retryReads=false" in m for m in parsed.warnings)


def test_fatal_values_raise_naming_option_and_value() -> None:
    with pytest.raises(InvalidURI, match=r"authMechanism: 'SCRAM-SHA-512'"):
        quiet("mongodb://u:p@h/?authMechanism=SCRAM-SHA-512")
    with pytest.raises(InvalidURI, match=r"authSource: ''"):
        quiet("mongodb://h/?authSource=")
    with pytest.raises(InvalidURI, match=r"w: '-1'"):
        quiet("mongodb://h/?w=-1")
    with pytest.raises(InvalidURI, match="ALLOWED_HOSTS"):
        quiet("mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ALLOWED_HOSTS:x")
    with pytest.raises(InvalidURI, match="'w'"):
        quiet("mongodb://h/?w")


def test_mechanism_properties_decode_then_split() -> None:
    parsed = quiet(
        "mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties="
        "environment:azure,TOKEN_RESOURCE:api%3A%2F%2Fx%26y"
    )
    assert parsed.options["authMechanismProperties"] == {
        "ENVIRONMENT": "azure",
        "TOKEN_RESOURCE": "api://x&y",
    }


@pytest.mark.parametrize(
    ("uri", "fragment"),
    [
        ("mongodb://a,b/?directConnection=true", "directConnection=true"),
        ("mongodb+srv://a.b.c/?directConnection=true", "mongodb+srv"),
        ("mongodb://a/?srvMaxHosts=2", "srvMaxHosts"),
        ("mongodb://a/?loadBalanced=true&replicaSet=rs", "replicaSet='rs'"),
        ("mongodb://a,b/?loadBalanced=true", "2 hosts"),
        ("mongodb://a/?tlsInsecure=true&tlsAllowInvalidHostnames=false", "tlsAllowInvalidHostnames"),
        ("mongodb://a/?proxyPort=1080", "without proxyHost"),
        ("mongodb://a/?proxyHost=p&proxyHost=q", "proxyHost is given 2 times"),
        ("mongodb://a/?w=0&journal=true", "w=0"),
        ("mongodb://a/?minPoolSize=10&maxPoolSize=5", "minPoolSize=10"),
        ("mongodb://a/?maxStalenessSeconds=120", "primary"),
        ("mongodb://a/?tls=false&tlsCAFile=ca.pem", "tlsCAFile"),
    ],
)
def test_combinations_are_refused_with_named_options(uri: str, fragment: str) -> None:
    with pytest.raises(InvalidURI) as info:
        quiet(uri)
    assert fragment in str(info.value)


def test_secrets_stay_out_of_reprs() -> None:
    parsed = quiet("mongodb://user:hunter2@h/?proxyHost=p&proxyUsername=u&proxyPassword=s3cret")
    assert "hunter2" not in repr(parsed)
    assert "s3cret" not in repr(parsed)


_URI_ALPHABET = st.sampled_from([*"abc019:/?@&=,%[].;+ -_$~", "%2F", "%3A", "%40", "%25", "%zz", "é"])
_KEYS = st.sampled_from(
    [
        "w",
        "tls",
        "ssl",
        "maxPoolSize",
        "readPreferenceTags",
        "authMechanismProperties",
        "authSource",
        "proxyHost",
        "proxyPort",
        "directConnection",
        "loadBalanced",
        "srvMaxHosts",
        "wtimeout",
        "journal",
        "j",
        "compressors",
        "unknownKey",
        "readPreference",
        "maxStalenessSeconds",
        "tlsInsecure",
        "tlsAllowInvalidCertificates",
    ]
)


@given(st.lists(_URI_ALPHABET, max_size=40).map("".join))
def test_arbitrary_text_parses_or_raises_invalid_uri(tail: str) -> None:
    for prefix in ("mongodb://", "mongodb+srv://"):
        try:
            parsed = quiet(prefix + tail)
        except InvalidURI:
            continue
        assert parsed.hosts


@given(st.lists(st.tuples(_KEYS, st.lists(_URI_ALPHABET, max_size=8).map("".join)), max_size=6))
def test_arbitrary_options_parse_or_raise_invalid_uri(pairs: list[tuple[str, str]]) -> None:
    query = "&".join(f"{key}={value}" for key, value in pairs)
    try:
        parsed = quiet(f"mongodb://host/?{query}")
    except InvalidURI:
        return
    given_names = {canonical_name(key) for key, _ in pairs}
    assert set(parsed.options) <= given_names  # nothing appears that was not asked for
