"""PyMongo's import paths and names exist in mongio and mean the same: for each PyMongo module a ported
program imports, mongio's counterpart has every public name PyMongo's has (exceptions declared below with
their reasons), and the names that carry behaviour (errors, collation, URI parsing, versions) behave as
PyMongo's do."""

from __future__ import annotations

import collections.abc
import importlib
import types
from typing import Any

import pytest

pytest.importorskip("pymongo")

# PyMongo module -> mongio module.
MODULES = {
    "pymongo": "mongio",
    "pymongo.errors": "mongio.errors",
    "pymongo.results": "mongio.results",
    "pymongo.read_concern": "mongio.read_concern",
    "pymongo.write_concern": "mongio.write_concern",
    "pymongo.read_preferences": "mongio.read_preferences",
    "pymongo.collation": "mongio.collation",
    "pymongo.monitoring": "mongio.monitoring",
    "pymongo.uri_parser": "mongio.uri_parser",
    "pymongo.driver_info": "mongio.driver_info",
    "pymongo.operations": "mongio.operations",
    "pymongo.asynchronous.mongo_client": "mongio.asynchronous.mongo_client",
    "pymongo.asynchronous.database": "mongio.asynchronous.database",
    "pymongo.asynchronous.collection": "mongio.asynchronous.collection",
    "pymongo.asynchronous.cursor": "mongio.asynchronous.cursor",
    "pymongo.asynchronous.command_cursor": "mongio.asynchronous.command_cursor",
    "pymongo.asynchronous.change_stream": "mongio.asynchronous.change_stream",
    "pymongo.asynchronous.client_session": "mongio.asynchronous.client_session",
    "pymongo.asynchronous.bulk": "mongio.asynchronous.bulk",
    "pymongo.asynchronous.uri_parser": "mongio.asynchronous.uri_parser",
    "gridfs": "mongio.gridfs",
    "gridfs.asynchronous": "mongio.gridfs",
    "gridfs.errors": "mongio.gridfs.errors",
}

# (PyMongo module, name) -> why mongio's counterpart does not have it.
EXCEPTIONS = {
    ("pymongo.write_concern", "validate_boolean"): "PyMongo's private argument check, not API",
    ("pymongo.read_preferences", "MovingAverage"): "PyMongo's round-trip-time averager, internal to its monitor",
    ("pymongo.monitoring", "Hello"): "PyMongo's hello-reply class; mongio's heartbeat events carry the reply document",
    ("pymongo.monitoring", "HelloCompat"): "PyMongo's hello/isMaster command-name constants, internal",
    ("pymongo.asynchronous.mongo_client", "ClusterTime"): "a typing alias PyMongo imports for annotations",
    ("pymongo.asynchronous.mongo_client", "SERVER_TYPE"): "imported by PyMongo from pymongo.server_type, not this module's API",
    ("pymongo.asynchronous.mongo_client", "TOPOLOGY_TYPE"): "imported by PyMongo from pymongo.topology_description",
    ("pymongo.asynchronous.mongo_client", "SRV_SCHEME"): "imported by PyMongo from its URI parser",
    ("pymongo.asynchronous.mongo_client", "DEFAULT_CODEC_OPTIONS"): "imported by PyMongo from bson; mongio.bson has it",
    ("pymongo.asynchronous.mongo_client", "DEFAULT_WRITE_CONCERN"): "imported; mongio.write_concern has it",
    ("pymongo.asynchronous.database", "DEFAULT_CODEC_OPTIONS"): "imported by PyMongo from bson; mongio.bson has it",
    ("pymongo.asynchronous.collection", "ASCENDING"): "imported; mongio and mongio.operations have it",
    ("pymongo.asynchronous.collection", "DEFAULT_CODEC_OPTIONS"): "imported by PyMongo from bson; mongio.bson has it",
    ("pymongo.asynchronous.collection", "DEFAULT_READ_CONCERN"): "imported; mongio.read_concern has it",
    ("pymongo.asynchronous.collection", "DEFAULT_WRITE_CONCERN"): "imported; mongio.write_concern has it",
    ("pymongo.asynchronous.cursor", "anext"): "a fallback for the builtin anext on old Pythons",
    ("pymongo.asynchronous.uri_parser", "SCHEME"): "imported constants of PyMongo's URI parser",
    ("pymongo.asynchronous.uri_parser", "SCHEME_LEN"): "imported constants of PyMongo's URI parser",
    ("pymongo.asynchronous.uri_parser", "SRV_SCHEME_LEN"): "imported constants of PyMongo's URI parser",
    ("pymongo.asynchronous.uri_parser", "SRV_SERVICE_NAME"): "imported constants of PyMongo's URI parser",
}


def public_names(module: types.ModuleType) -> set[str]:
    """``__all__`` when the module declares it; otherwise the classes and functions defined in it and its
    module-level values (not modules, typing helpers or names imported only for annotations)."""
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return set(declared)
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or name == "TYPE_CHECKING" or isinstance(value, types.ModuleType):
            continue
        if isinstance(value, type | types.FunctionType):
            if value.__module__ == module.__name__:
                names.add(name)
        elif type(value).__module__ not in ("typing", "typing_extensions", "__future__"):
            names.add(name)
    return names


@pytest.mark.parametrize("pymongo_name", sorted(MODULES))
def test_every_public_name_of_the_pymongo_module_exists_in_mongio(pymongo_name: str) -> None:
    theirs = importlib.import_module(pymongo_name)
    ours = importlib.import_module(MODULES[pymongo_name])
    missing = sorted(
        name
        for name in public_names(theirs)
        if not hasattr(ours, name) and (pymongo_name, name) not in EXCEPTIONS
    )
    assert missing == [], f"{MODULES[pymongo_name]} lacks {missing}"


def test_the_declared_exceptions_are_still_missing_and_still_pymongo_names() -> None:
    for (pymongo_name, name), reason in EXCEPTIONS.items():
        assert reason
        assert hasattr(importlib.import_module(pymongo_name), name), (pymongo_name, name)
        assert not hasattr(importlib.import_module(MODULES[pymongo_name]), name), (pymongo_name, name)


def test_the_async_class_names_are_mongio_classes() -> None:
    import mongio
    from mongio.asynchronous.change_stream import AsyncChangeStream
    from mongio.asynchronous.client_session import AsyncClientSession
    from mongio.asynchronous.collection import AsyncCollection
    from mongio.asynchronous.command_cursor import AsyncCommandCursor
    from mongio.asynchronous.cursor import AsyncCursor
    from mongio.asynchronous.database import AsyncDatabase
    from mongio.asynchronous.mongo_client import AsyncMongoClient
    from mongio.change_stream import ChangeStream

    assert AsyncMongoClient is mongio.MongoClient
    assert AsyncDatabase is mongio.Database
    assert AsyncCollection is mongio.Collection
    assert AsyncCursor is mongio.Cursor
    assert AsyncCommandCursor is mongio.CommandCursor
    assert AsyncClientSession is mongio.ClientSession
    assert AsyncChangeStream is ChangeStream


# -- errors ----------------------------------------------------------------------------------------------------


def _pymongo_error_classes() -> dict[str, type]:
    import pymongo.errors

    return {
        name: value
        for name, value in vars(pymongo.errors).items()
        if isinstance(value, type) and issubclass(value, BaseException) and not name.startswith("_")
    }


def test_errors_keep_pymongos_hierarchy() -> None:
    import mongio.errors

    for name, theirs in _pymongo_error_classes().items():
        ours = getattr(mongio.errors, name)
        for base_name, base in _pymongo_error_classes().items():
            if issubclass(theirs, base):
                assert issubclass(ours, getattr(mongio.errors, base_name)), f"{name} must subclass {base_name}"


def _cause(kind: str) -> BaseException:
    from mongio import errors

    causes: dict[str, BaseException] = {
        "socket": errors.NetworkTimeout("read timed out"),
        "selection": errors.ServerSelectionTimeoutError("no primary"),
        "checkout": errors.WaitQueueTimeoutError("pool busy"),
        "server": errors.ExecutionTimeout("time limit", 50, {"ok": 0, "code": 50, "errmsg": "time limit"}),
        "write concern": errors.WTimeoutError("waiting", 64, {"code": 64, "errInfo": {"wtimeout": True}}),
    }
    return causes[kind]


@pytest.mark.parametrize(
    ("kind", "pymongo_class"),
    [
        ("socket", "NetworkTimeout"),
        ("selection", "ServerSelectionTimeoutError"),
        ("checkout", "WaitQueueTimeoutError"),
        ("server", "ExecutionTimeout"),
        ("write concern", "WTimeoutError"),
        (None, "ExecutionTimeout"),
    ],
)
def test_a_csot_timeout_is_caught_by_the_except_clause_pymongo_code_uses(kind: str | None, pymongo_class: str) -> None:
    from mongio import errors
    from mongio.execution.deadline import timeout_error

    cause = None if kind is None else _cause(kind)
    error = timeout_error(cause, detail="too little time left")
    assert isinstance(error, errors.OperationTimeoutError)
    assert isinstance(error, getattr(errors, pymongo_class))
    assert isinstance(error, errors.PyMongoError) and error.timeout
    assert error.cause is cause
    with pytest.raises(getattr(errors, pymongo_class)):
        raise error


def test_a_timeout_at_the_socket_is_an_autoreconnect_and_keeps_its_labels() -> None:
    from mongio import errors
    from mongio.execution.deadline import timeout_error

    cause = errors.NetworkTimeout("read timed out", error_labels=["RetryableWriteError"])
    error = timeout_error(cause)
    assert isinstance(error, errors.AutoReconnect)
    assert errors.OperationFailure not in type(error).__mro__
    assert error.has_error_label("RetryableWriteError")


def test_a_timeout_over_a_server_error_keeps_the_labels_the_driver_added() -> None:
    from mongio import errors
    from mongio.execution.deadline import timeout_error

    cause = errors.WriteConcernError("wc", 64, {"ok": 1, "code": 64})
    cause.add_error_label("UnknownTransactionCommitResult")
    error = timeout_error(cause)
    assert isinstance(error, errors.WTimeoutError)
    assert error.has_error_label("UnknownTransactionCommitResult")


def test_a_timeout_before_sending_reports_maxtimemsexpired_like_pymongo() -> None:
    from mongio import errors
    from mongio.execution.deadline import timeout_error

    error = timeout_error(detail="no time left")
    assert isinstance(error, errors.ExecutionTimeout)
    assert error.code == 50
    assert error.details is not None and error.details["code"] == 50


def test_client_bulk_write_exception_lives_in_errors_and_is_an_operation_failure() -> None:
    from mongio import errors
    from mongio.operations import ClientBulkWriteException

    assert errors.ClientBulkWriteException is ClientBulkWriteException
    failure = ClientBulkWriteException(None, [{"idx": 0, "code": 11000, "errmsg": "dup"}], [], None)
    assert isinstance(failure, errors.OperationFailure) and failure.code == 65
    assert failure.write_errors[0]["idx"] == 0


# -- collation ---------------------------------------------------------------------------------------------------


def test_collation_documents_match_pymongos() -> None:
    import pymongo.collation as theirs

    import mongio.collation as ours

    cases: list[dict[str, Any]] = [
        {"locale": "en_US"},
        {"locale": "fr", "strength": 2, "caseLevel": True, "backwards": True},
        {"locale": "de", "caseFirst": "upper", "alternate": "shifted", "maxVariable": "space", "numericOrdering": False},
        {"locale": "en", "normalization": True, "futureSetting": 7},
    ]
    for case in cases:
        assert ours.Collation(**case).document == theirs.Collation(**case).document
    for holder in ("CollationStrength", "CollationAlternate", "CollationMaxVariable", "CollationCaseFirst"):
        public = {k: v for k, v in vars(getattr(theirs, holder)).items() if not k.startswith("_")}
        assert {k: getattr(getattr(ours, holder), k) for k in public} == public


def test_collation_refuses_what_pymongo_refuses() -> None:
    from mongio.collation import Collation

    with pytest.raises(TypeError):
        Collation(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Collation("en", caseLevel="yes")  # type: ignore[arg-type]
    assert Collation("en", strength=1) == Collation("en", strength=1)
    assert Collation("en", strength=1) != Collation("en", strength=2)


def test_operations_send_a_collation_object_as_its_document() -> None:
    from mongio.collation import Collation, CollationStrength
    from mongio.operations import IndexModel, UpdateOne

    collation = Collation("en", strength=CollationStrength.SECONDARY)
    assert IndexModel([("name", 1)], collation=collation).document["collation"] == {"locale": "en", "strength": 2}
    assert UpdateOne({}, {"$set": {"a": 1}}, collation=collation)._collation == {"locale": "en", "strength": 2}


# -- URI parser --------------------------------------------------------------------------------------------------

URIS = [
    "mongodb://us%40r:p%3Aw@h1:27018,[::1],H3/db.coll?connectTimeoutMS=20000&replicaSet=rs"
    "&readPreference=secondary&readPreferenceTags=dc:ny&w=majority&authMechanism=SCRAM-SHA-256&tls=true",
    "mongodb://h",
    "mongodb://u@h/?w=1&socketTimeoutMS=1500&localThresholdMS=20&wTimeoutMS=100&maxIdleTimeMS=50",
    "mongodb://h/admin?retryWrites=false&appname=app&heartbeatFrequencyMS=600",
]


@pytest.mark.parametrize("uri", URIS)
def test_parse_uri_gives_pymongos_dict(uri: str) -> None:
    from pymongo import uri_parser as theirs

    from mongio import uri_parser as ours

    expected = theirs.parse_uri(uri)
    got = ours.parse_uri(uri)
    assert set(got) == set(expected)
    for key in ("nodelist", "username", "password", "database", "collection", "fqdn"):
        assert got[key] == expected[key], key
    assert {k.lower(): v for k, v in got["options"].items()} == {k.lower(): v for k, v in expected["options"].items()}


def test_parse_uri_refuses_an_unknown_option_unless_warned() -> None:
    from mongio import uri_parser
    from mongio.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="foo"):
        uri_parser.parse_uri("mongodb://h/?w=1&foo=bar")
    with pytest.warns(Warning, match="foo"):
        parsed = uri_parser.parse_uri("mongodb://h/?w=1&foo=bar", warn=True)
    assert dict(parsed["options"]) == {"w": 1}
    assert uri_parser.parse_uri("mongodb://h/?foo=bar", validate=False)["options"]["foo"] == "bar"


def test_parse_uri_of_an_srv_string_points_to_the_async_parser() -> None:
    from mongio import uri_parser
    from mongio.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"asynchronous\.uri_parser"):
        uri_parser.parse_uri("mongodb+srv://cluster.example.com")


def test_uri_helpers_match_pymongos() -> None:
    from pymongo import uri_parser as theirs

    from mongio import uri_parser as ours

    for entity in ("HoSt:12", "[::1]:5", "example.com"):
        assert ours.parse_host(entity) == theirs.parse_host(entity)
    assert ours.split_hosts("a,B:2", default_port=1) == theirs.split_hosts("a,B:2", default_port=1)
    assert ours.parse_userinfo("a%40:b") == theirs.parse_userinfo("a%40:b")
    text = "w=1&journal=true&connectTimeoutMS=10"
    lowered = {key.lower(): value for key, value in theirs.split_options(text).items()}
    assert {key.lower(): value for key, value in ours.split_options(text).items()} == lowered


# -- versions ----------------------------------------------------------------------------------------------------


def test_version_helpers() -> None:
    import mongio
    from mongio.bson._compiled import load_speedups

    assert mongio.version == mongio.__version__ == mongio.get_version_string()
    assert mongio.version_tuple[:3] == tuple(int(part) for part in mongio.__version__.split(".")[:3])
    assert mongio.has_c() is (load_speedups() is not None)
    assert mongio.MIN_SUPPORTED_WIRE_VERSION <= mongio.MAX_SUPPORTED_WIRE_VERSION


def test_driver_info_is_the_handshake_class() -> None:
    from mongio.connection.handshake import ClientMetadata
    from mongio.driver_info import DriverInfo

    metadata = ClientMetadata(driver_info=DriverInfo("odm", "2.0", "py"))
    assert metadata.document["driver"]["name"].endswith("|odm")


# -- the recorded differences ------------------------------------------------------------------------------------


def test_the_differences_list_is_well_formed() -> None:
    from pathlib import Path

    import yaml

    import mongio

    path = Path(mongio.__file__).parent / "compat" / "differences.yaml"
    sections = yaml.safe_load(path.read_text())
    assert set(sections) == {"client", "bson"}
    for entry in sections["client"] + sections["bson"]:
        assert {"id", "api", "pymongo", "mongio", "why"} <= set(entry), entry
        assert all(str(entry[key]).strip() for key in ("id", "api", "pymongo", "mongio", "why")), entry


# -- the client's attributes -------------------------------------------------------------------------------------


def test_every_public_attribute_of_pymongos_async_classes_exists() -> None:
    """A missing attribute would otherwise become a database (client.x) or a collection (db.x)."""
    from gridfs.asynchronous import grid_file
    from pymongo.asynchronous import change_stream as pymongo_change_stream
    from pymongo.asynchronous import (
        client_session,
        collection,
        command_cursor,
        cursor,
        database,
        mongo_client,
    )

    import mongio
    from mongio import change_stream, gridfs

    # (PyMongo class, mongio class, names not there with the reason listed in compat/differences.yaml)
    pairs: list[tuple[type, type, set[str]]] = [
        (mongo_client.AsyncMongoClient, mongio.MongoClient, set()),
        (database.AsyncDatabase, mongio.Database, set()),
        (collection.AsyncCollection, mongio.Collection, set()),
        (cursor.AsyncCursor, mongio.Cursor, {"max_scan"}),
        (command_cursor.AsyncCommandCursor, mongio.CommandCursor, set()),
        (pymongo_change_stream.AsyncChangeStream, change_stream.ChangeStream, set()),
        (client_session.AsyncClientSession, mongio.ClientSession, {"bind"}),
        (grid_file.AsyncGridFSBucket, gridfs.GridFSBucket, set()),
        (grid_file.AsyncGridFS, gridfs.GridFS, set()),
        (grid_file.AsyncGridIn, gridfs.GridIn, {"read", "set"}),
        (grid_file.AsyncGridOut, gridfs.GridOut, {"fileno", "flush", "isatty", "truncate", "write", "writelines"}),
        (grid_file.AsyncGridOutCursor, gridfs.GridOutCursor, {"max_scan"}),
    ]
    for theirs, ours, known in pairs:
        missing = {name for name in dir(theirs) if not name.startswith("_") and not hasattr(ours, name)}
        assert missing == known, (theirs.__name__, sorted(missing))


def test_clients_compare_and_refuse_iteration_as_pymongos() -> None:
    import mongio

    first = mongio.MongoClient("mongodb://b:1,a/?replicaSet=x")
    second = mongio.MongoClient(["a", "b:1"], replicaSet="x")
    assert first == second and hash(first) == hash(second)
    assert first != mongio.MongoClient("mongodb://a/?replicaSet=x")
    assert first.eq_props() == ((("a", 27017), ("b", 1)), "x", None, "mongodb")
    with pytest.raises(TypeError, match="not iterable"):
        list(first)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="not iterable"):
        first.next()
    with pytest.raises(TypeError, match="'MongoClient' object is not iterable"):
        next(first)
    # Not an Iterable either, as PyMongo's client is not.
    client: object = first
    assert not isinstance(client, collections.abc.Iterable)
    with pytest.raises(AttributeError, match=r"client\['_hidden'\]"):
        first._hidden  # noqa: B018
    assert isinstance(first.append_metadata, type(first.close))


def test_the_driver_keyword_takes_pymongos_driver_info_too() -> None:
    from pymongo.driver_info import DriverInfo as PyMongoDriverInfo

    import mongio
    from mongio.driver_info import DriverInfo

    ported = mongio.MongoClient(driver=PyMongoDriverInfo("odm", "1.0"))
    assert ported._metadata.driver_info == (DriverInfo("odm", "1.0"),)
    with pytest.raises(TypeError, match="DriverInfo"):
        mongio.MongoClient(driver="odm")
