"""What a unified test needs from the server, read from the test itself: the skip list's capability rules.

A ``TestProfile`` gathers, from a unified test file's JSON and one of its tests, every operation the test runs
(those inside ``withTransaction`` callbacks, ``runOnThread`` and ``loop`` included, in order), the fail points it
configures and the client entities it declares (``createEntities`` at the top and in operations). A rule of a
known ``kind`` (``RULE_KINDS``), configured in ``skips.yaml``, looks at the profile and says whether the test
needs something the test server cannot do. Pure logic: no server, no driver.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from spec_runner.unified.legacy import is_legacy_file, to_unified
from spec_runner.unified.requirements import parse_version

RETRYABLE_WRITE_ERROR_CODES = frozenset({6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436})
"""The retryable writes specification's retryable error codes (a write concern error with one of them, or with
the RetryableWriteError label, makes the driver retry the write)."""

_NESTED_OPERATION_LISTS = ("callback", "operations")  # withTransaction's callback, loop's operations


@dataclass(frozen=True)
class TestProfile:
    """The parts of one unified test the capability rules read (raw JSON values, not Extended JSON)."""

    __test__ = False  # not a pytest test class

    operations: Sequence[Mapping[str, Any]]
    fail_points: Sequence[Mapping[str, Any]]
    clients: Mapping[str, Mapping[str, Any]]
    entity_kinds: frozenset[str] = field(default_factory=frozenset)
    requirements: Sequence[Sequence[Mapping[str, Any]]] = ()  # the file's, then the test's runOnRequirements
    sessions: frozenset[str] = field(default_factory=frozenset)  # the session entities' ids
    key_providers: frozenset[str] = field(default_factory=frozenset)  # initialData's masterKey providers
    create_options: Sequence[Mapping[str, Any]] = ()  # initialData's createOptions
    data_key_providers: Mapping[bytes, str] = field(default_factory=dict)  # initialData's data key id -> provider
    vault_keys: Sequence[Mapping[str, Any]] = ()  # initialData's data key documents (those with a masterKey)
    ciphertext_keys: frozenset[bytes] = frozenset()  # the key ids of the ciphertexts in the test and its data

    @classmethod
    def of(cls, document: Mapping[str, Any], test: Mapping[str, Any]) -> TestProfile:
        operations = list(_flatten(test.get("operations") or ()))
        entities = [*(document.get("createEntities") or ())]
        for op in operations:
            if op.get("name") == "createEntities" and op.get("object") == "testRunner":
                entities.extend((op.get("arguments") or {}).get("entities") or ())
        clients = {}
        kinds = set()
        sessions = set()
        for entity in entities:
            if isinstance(entity, Mapping) and len(entity) == 1:
                ((kind, body),) = entity.items()
                kinds.add(kind)
                if kind == "client" and isinstance(body, Mapping):
                    clients[str(body.get("id"))] = body
                if kind == "session" and isinstance(body, Mapping):
                    sessions.add(str(body.get("id")))
        requirements = [
            [item for item in found if isinstance(item, Mapping)]
            for found in (document.get("runOnRequirements"), test.get("runOnRequirements"))
            if isinstance(found, list) and found
        ]
        return cls(
            operations=operations,
            fail_points=[fp for op in operations if (fp := _fail_point(op)) is not None],
            clients=clients,
            entity_kinds=frozenset(kinds),
            requirements=requirements,
            sessions=frozenset(sessions),
            key_providers=frozenset(_master_key_providers(document.get("initialData") or ())),
            create_options=[
                item["createOptions"]
                for item in document.get("initialData") or ()
                if isinstance(item, Mapping) and isinstance(item.get("createOptions"), Mapping)
            ],
            data_key_providers=dict(_data_keys(document.get("initialData") or ())),
            vault_keys=list(_key_documents(document.get("initialData") or ())),
            ciphertext_keys=frozenset(_ciphertext_keys([test, document.get("initialData") or ()])),
        )

    def client_retries_writes(self, name: Any) -> bool:
        """Whether client entity ``name`` retries writes (the default, unless its URI options turn it off)."""
        options = (self.clients.get(str(name)) or {}).get("uriOptions") or {}
        return not any(key.lower() == "retrywrites" and value is False for key, value in options.items())


def _flatten(operations: Sequence[Any]) -> Iterator[Mapping[str, Any]]:
    for op in operations:
        if not isinstance(op, Mapping):
            continue
        yield op
        arguments = op.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            continue
        for key in _NESTED_OPERATION_LISTS:
            nested = arguments.get(key)
            if isinstance(nested, list):
                yield from _flatten(nested)
        if op.get("name") == "runOnThread" and isinstance(arguments.get("operation"), Mapping):
            yield from _flatten([arguments["operation"]])


def _fail_point(op: Mapping[str, Any]) -> Mapping[str, Any] | None:
    arguments = op.get("arguments") or {}
    if op.get("name") in ("failPoint", "targetedFailPoint"):
        fail_point = arguments.get("failPoint")
    elif op.get("name") == "runCommand":
        fail_point = arguments.get("command")
    else:
        return None
    if isinstance(fail_point, Mapping) and "configureFailPoint" in fail_point:
        return fail_point
    return None


def _fail_command_data(fail_point: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if fail_point.get("configureFailPoint") != "failCommand":
        return None
    data = fail_point.get("data")
    return data if isinstance(data, Mapping) else {}


def _activations(fail_point: Mapping[str, Any]) -> float:
    """How many commands the fail point fails: ``times``, or unlimited for ``alwaysOn`` and ``skip``."""
    mode = fail_point.get("mode")
    if isinstance(mode, Mapping) and isinstance(mode.get("times"), int):
        return float(mode["times"])
    return 0.0 if mode == "off" else float("inf")


def _retryable_write_concern_error(data: Mapping[str, Any]) -> bool:
    error = data.get("writeConcernError")
    if not isinstance(error, Mapping):
        return False
    labels = error.get("errorLabels")
    if isinstance(labels, list):  # the fail point's labels replace the server's own
        return "RetryableWriteError" in labels
    return error.get("code") in RETRYABLE_WRITE_ERROR_CODES


def _master_key_providers(value: Any) -> Iterator[str]:
    """The ``provider`` of every ``masterKey`` document inside ``value`` (data keys in initial data)."""
    if isinstance(value, Mapping):
        master_key = value.get("masterKey")
        if isinstance(master_key, Mapping) and isinstance(master_key.get("provider"), str):
            yield master_key["provider"]
        for child in value.values():
            yield from _master_key_providers(child)
    elif isinstance(value, list):
        for child in value:
            yield from _master_key_providers(child)


def _key_documents(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every data key document (one with a ``masterKey`` naming its ``provider``) inside ``value``."""
    if isinstance(value, Mapping):
        master_key = value.get("masterKey")
        if isinstance(master_key, Mapping) and isinstance(master_key.get("provider"), str):
            yield value
            return
        for child in value.values():
            yield from _key_documents(child)
    elif isinstance(value, list):
        for child in value:
            yield from _key_documents(child)


def _binary_bytes(value: Any, subtype: str) -> bytes | None:
    """The bytes of an Extended JSON ``$binary`` of ``subtype`` (two hex digits), else None."""
    if not isinstance(value, Mapping) or set(value) != {"$binary"}:
        return None
    binary = value["$binary"]
    if not isinstance(binary, Mapping) or binary.get("subType") != subtype:
        return None
    try:
        return base64.b64decode(str(binary.get("base64", "")), validate=True)
    except ValueError:
        return None


def _data_keys(value: Any) -> Iterator[tuple[bytes, str]]:
    """(the key's UUID bytes, its masterKey provider) of every data key document inside ``value``."""
    if isinstance(value, Mapping):
        master_key, key_id = value.get("masterKey"), _binary_bytes(value.get("_id"), "04")
        if isinstance(master_key, Mapping) and isinstance(master_key.get("provider"), str) and key_id is not None:
            yield key_id, master_key["provider"]
        for child in value.values():
            yield from _data_keys(child)
    elif isinstance(value, list):
        for child in value:
            yield from _data_keys(child)


_CIPHERTEXT_KINDS = (1, 2)  # BSON binary encrypted: deterministic and random ciphertext (then the key's UUID)


def _ciphertext_keys(value: Any) -> Iterator[bytes]:
    """The key UUIDs of the client-side encryption ciphertexts (subtype 6) anywhere inside ``value``."""
    data = _binary_bytes(value, "06")
    if data is not None:
        if len(data) > 17 and data[0] in _CIPHERTEXT_KINDS:
            yield data[1:17]
    elif isinstance(value, Mapping):
        for child in value.values():
            yield from _ciphertext_keys(child)
    elif isinstance(value, list):
        for child in value:
            yield from _ciphertext_keys(child)


def _contains_key(value: Any, key: str) -> bool:
    if isinstance(value, Mapping):
        return key in value or any(_contains_key(v, key) for v in value.values())
    if isinstance(value, list):
        return any(_contains_key(v, key) for v in value)
    return False


# --- rule kinds ------------------------------------------------------------------------------------------
#
# Each kind is a function (profile, parameters) -> bool; the parameters come from the rule's skips.yaml entry.


def _fail_point_named(profile: TestProfile, names: Sequence[str]) -> bool:
    """A fail point of one of ``names`` is configured."""
    return any(fp.get("configureFailPoint") in names for fp in profile.fail_points)


def _fail_command_lists(profile: TestProfile, command: str, canonical: str) -> bool:
    """A failCommand fail point lists ``command`` but not its ``canonical`` spelling, and a client of the test
    handshakes with legacy hello (no serverApi, not load balanced), which is what the listing aims at."""
    listed = any(
        command in (data.get("failCommands") or ()) and canonical not in (data.get("failCommands") or ())
        for fp in profile.fail_points
        if (data := _fail_command_data(fp)) is not None
    )
    legacy_handshake = any(
        "serverApi" not in options
        and not any(
            key.lower() == "loadbalanced" and value is True
            for key, value in (options.get("uriOptions") or {}).items()
        )
        for options in profile.clients.values()
    )
    return listed and legacy_handshake


def _write_concern_error_on_retry(profile: TestProfile, commands: Sequence[str]) -> bool:
    """A failCommand fail point returns a retryable writeConcernError to one of ``commands`` at least twice
    (so the retry is meant to get it too), and a client of the test retries writes."""
    return any(
        set(data.get("failCommands") or ()) & set(commands)
        and _retryable_write_concern_error(data)
        and _activations(fp) >= 2
        for fp in profile.fail_points
        if (data := _fail_command_data(fp)) is not None
    ) and any(profile.client_retries_writes(name) for name in profile.clients)


def _retried_client_bulk_write(profile: TestProfile) -> bool:
    """A client-level bulkWrite of retryable models only (no updateMany/deleteMany) runs on a client that retries
    writes while a failCommand fail point gives bulkWrite a retryable writeConcernError: the write commits, and
    the retry must be answered from the server's record of it."""
    wce_fail_point = any(
        "bulkWrite" in (data.get("failCommands") or ()) and _retryable_write_concern_error(data)
        for fp in profile.fail_points
        if (data := _fail_command_data(fp)) is not None
    )
    if not wce_fail_point:
        return False
    for op in profile.operations:
        if op.get("name") != "clientBulkWrite" or not profile.client_retries_writes(op.get("object")):
            continue
        models = (op.get("arguments") or {}).get("models") or ()
        kinds = {next(iter(model)) for model in models if isinstance(model, Mapping) and model}
        if kinds and not kinds & {"updateMany", "deleteMany"}:
            return True
    return False


def _argument_on(profile: TestProfile, argument: str, operations: Sequence[str]) -> bool:
    """One of ``operations`` is given ``argument`` with a true value."""
    return any(
        op.get("name") in operations and bool((op.get("arguments") or {}).get(argument))
        for op in profile.operations
    )


def _discovery_events_beyond(profile: TestProfile, counts: Mapping[str, int]) -> bool:
    """Before anything that could change the topology (a fail point, a command, closing a client), the test
    waits for (or counts) more events of a type in ``counts`` than the discovery of one server publishes
    (``counts`` gives that number per event type). Heartbeat events are left out when a client of the test
    sets heartbeatFrequencyMS, since one server then soon publishes more of them."""
    fast_heartbeats = any(
        key.lower() == "heartbeatfrequencyms"
        for options in profile.clients.values()
        for key in (options.get("uriOptions") or {})
    )
    for op in profile.operations:
        name = op.get("name")
        if _fail_point(op) is not None or name in ("runCommand", "close"):
            return False
        if name not in ("waitForEvent", "assertEventCount") or op.get("object") != "testRunner":
            continue
        arguments = op.get("arguments") or {}
        for event in arguments.get("event") or {}:
            if event not in counts or (fast_heartbeats and event.startswith("serverHeartbeat")):
                continue
            if int(arguments.get("count", 0)) > int(counts[event]):
                return True
    return False


def _automatic_encryption(profile: TestProfile) -> bool:
    """A client entity with autoEncryptOpts is declared."""
    return any("autoEncryptOpts" in options for options in profile.clients.values())


def _encrypted_fields_used(profile: TestProfile) -> bool:
    """Queryable Encryption: a collection is created (initialData) or dropped/created by an operation with
    ``encryptedFields``, or a client's autoEncryptOpts has an ``encryptedFieldsMap``."""
    return (
        any("encryptedFields" in options for options in profile.create_options)
        or any(
            "encryptedFieldsMap" in (options.get("autoEncryptOpts") or {}) for options in profile.clients.values()
        )
        or any(
            op.get("name") in ("createCollection", "dropCollection", "createEncryptedCollection")
            and _contains_key(op.get("arguments") or {}, "encryptedFields")
            for op in profile.operations
        )
    )


def _remote_encryption_schema(profile: TestProfile) -> bool:
    """A collection of initialData is created with a ``$jsonSchema`` validator that holds ``encrypt``."""
    return any(
        isinstance(options.get("validator"), Mapping)
        and _contains_key(options["validator"].get("$jsonSchema") or {}, "encrypt")
        for options in profile.create_options
    )


def _automatic_encryption_with_keys_of(profile: TestProfile, providers: Sequence[str]) -> bool:
    """A client with autoEncryptOpts, and a ciphertext in the test or its data (what it writes, reads or expects)
    made with a data key of the file's key vault whose master key is of a provider in ``providers``: automatic
    encryption or decryption has to unwrap that key."""
    if not _automatic_encryption(profile):
        return False
    wanted = set(providers)
    return any(
        profile.data_key_providers.get(key_id, "").partition(":")[0] in wanted for key_id in profile.ciphertext_keys
    )


_UNWRAPS_DATA_KEYS = frozenset({"encrypt", "decrypt"})
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def _provider_kind(name: Any) -> str:
    """``aws`` for ``aws`` and ``aws:name1``."""
    return str(name).partition(":")[0]


def _filter_condition_holds(value: Any, condition: Any) -> bool | None:
    """Whether a key's field ``value`` meets one field ``condition`` of a query filter: equality (an array
    field holding the value counts) or ``{"$ne": v}``; None for any other operator (not known here)."""

    def equal(expected: Any) -> bool:
        return value == expected or (isinstance(value, list) and expected in value)

    if isinstance(condition, Mapping) and any(str(key).startswith("$") for key in condition):
        if set(condition) == {"$ne"}:
            return not equal(condition["$ne"])
        return None
    return equal(condition)


def _selected_keys(query: Any, keys: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The data keys of ``keys`` a rewrapManyDataKey ``query`` selects; every key when the filter uses what
    :func:`_filter_condition_holds` does not know (or is not a document)."""
    if not isinstance(query, Mapping):
        return list(keys)
    selected = []
    for key in keys:
        verdicts = [_filter_condition_holds(key.get(field), condition) for field, condition in query.items()]
        if None in verdicts or all(verdicts):
            selected.append(key)
    return selected


def _unwraps_data_keys_of(profile: TestProfile, providers: Sequence[str]) -> bool:
    """A clientEncryption operation unwraps data keys of the file's key vault data (initialData) whose master
    key is of a provider in ``providers``: explicit encryption or decryption while the vault holds such keys,
    or a rewrapManyDataKey whose filter selects one. (Automatic encryption's are
    :func:`_automatic_encryption_with_keys_of`'s.)"""
    wanted = set(providers)
    if any(op.get("name") in _UNWRAPS_DATA_KEYS for op in profile.operations) and any(
        _provider_kind(name) in wanted for name in profile.key_providers
    ):
        return True
    for op in profile.operations:
        if op.get("name") != "rewrapManyDataKey":
            continue
        selected = _selected_keys((op.get("arguments") or {}).get("filter"), profile.vault_keys)
        if any(_provider_kind(key["masterKey"]["provider"]) in wanted for key in selected):
            return True
    return False


def _kms_host(kind: str, master_key: Mapping[str, Any]) -> str | None:
    """The host a master key's KMS requests go to: its ``endpoint`` (Azure's ``keyVaultEndpoint``), else the
    provider's default host (AWS ``kms.<region>.amazonaws.com``, GCP ``cloudkms.googleapis.com``); None when
    the master key names no host (KMIP's is the provider's ``endpoint``, which the runner fills; a master key
    missing the fields that name its KMS is refused before any request)."""
    endpoint = master_key.get("keyVaultEndpoint" if kind == "azure" else "endpoint")
    if isinstance(endpoint, str):
        return endpoint
    if kind == "aws" and isinstance(master_key.get("region"), str):
        return f"kms.{master_key['region']}.amazonaws.com"
    if kind == "gcp" and "keyName" in master_key:
        return "cloudkms.googleapis.com"
    return None


def _is_loopback(endpoint: str) -> bool:
    """Whether a KMS endpoint (``host``, ``host:port``, ``[v6]:port``) names a loopback host."""
    if endpoint.startswith("["):
        host = endpoint[1:].partition("]")[0]
    elif endpoint.count(":") == 1:
        host = endpoint.partition(":")[0]
    else:
        host = endpoint  # a bare host, or a bare IPv6 address
    return host in _LOOPBACK_HOSTS


def _kms_host_off_loopback(profile: TestProfile, providers: Sequence[str]) -> bool:
    """createDataKey, rewrapManyDataKey or createEncryptedCollection gives a master key of a provider in
    ``providers`` whose KMS host (:func:`_kms_host`) is not on loopback."""
    wanted = set(providers)
    for op in profile.operations:
        arguments = op.get("arguments") or {}
        opts = arguments.get("opts") or {}
        if op.get("name") == "rewrapManyDataKey":
            provider, master_key = opts.get("provider"), opts.get("masterKey")
        elif op.get("name") == "createDataKey":
            provider, master_key = arguments.get("kmsProvider"), opts.get("masterKey")
        elif op.get("name") == "createEncryptedCollection":
            provider, master_key = arguments.get("kmsProvider"), arguments.get("masterKey")
        else:
            continue
        kind = _provider_kind(provider)
        if kind not in wanted:
            continue
        host = _kms_host(kind, master_key if isinstance(master_key, Mapping) else {})
        if host is not None and not _is_loopback(host):
            return True
    return False


def _server_side_javascript(profile: TestProfile) -> bool:
    """An operation's arguments hold a ``$where`` query, or a mapReduce is expected to return documents."""
    for op in profile.operations:
        if _contains_key(op.get("arguments") or {}, "$where"):
            return True
        if op.get("name") == "mapReduce" and isinstance(op.get("expectResult"), list) and op["expectResult"]:
            return True
    return False


def _server_parameter_required(profile: TestProfile, names: Sequence[str]) -> bool:
    """The file's or the test's runOnRequirements need one of the server parameters ``names`` in every
    alternative they give (a parameter the server's getParameter does not know can never be confirmed)."""
    return any(
        all(set(item.get("serverParameters") or {}) & set(names) for item in alternatives)
        for alternatives in profile.requirements
    )


RuleCheck = Callable[..., bool]

RULE_KINDS: dict[str, tuple[RuleCheck, frozenset[str]]] = {
    "fail-point-named": (_fail_point_named, frozenset({"names"})),
    "fail-command-lists": (_fail_command_lists, frozenset({"command", "canonical"})),
    "write-concern-error-on-retry": (_write_concern_error_on_retry, frozenset({"commands"})),
    "retried-client-bulk-write": (_retried_client_bulk_write, frozenset()),
    "argument-on": (_argument_on, frozenset({"argument", "operations"})),
    "discovery-events-beyond": (_discovery_events_beyond, frozenset({"counts"})),
    "encrypted-fields-used": (_encrypted_fields_used, frozenset()),
    "remote-encryption-schema": (_remote_encryption_schema, frozenset()),
    "automatic-encryption-with-keys-of": (_automatic_encryption_with_keys_of, frozenset({"providers"})),
    "unwraps-data-keys-of": (_unwraps_data_keys_of, frozenset({"providers"})),
    "kms-host-off-loopback": (_kms_host_off_loopback, frozenset({"providers"})),
    "server-side-javascript": (_server_side_javascript, frozenset()),
    "server-parameter-required": (_server_parameter_required, frozenset({"names"})),
}
"""Rule kind -> (its check, the parameters it takes)."""


@dataclass(frozen=True)
class CapabilityRule:
    """A skip-list rule: tests (of the suites matching ``suites``) whose profile ``kind`` matches are skipped."""

    id: str
    kind: str
    parameters: Mapping[str, Any]
    reason: str
    suites: tuple[str, ...] = ("*",)

    def __post_init__(self) -> None:
        known = RULE_KINDS.get(self.kind)
        if known is None:
            raise ValueError(f"capability rule {self.id!r}: unknown kind {self.kind!r} (known: {sorted(RULE_KINDS)})")
        given = set(self.parameters)
        if given != known[1]:
            raise ValueError(
                f"capability rule {self.id!r} ({self.kind}) takes parameters {sorted(known[1])}, got {sorted(given)}"
            )

    def matches(self, profile: TestProfile) -> bool:
        check, _ = RULE_KINDS[self.kind]
        return check(profile, **self.parameters)


TEST_SERVER_VERSION: tuple[int, int, int] = (8, 2, 11)
"""The version SecantusDB reports (TEST-SERVER.md); it runs as a one-member replica set or a standalone."""
TEST_SERVER_TOPOLOGIES = ("replicaset", "single")


def _requirement_met(requirement: Mapping[str, Any]) -> bool:
    """Whether the test server can meet one runOnRequirement as far as version, topology and serverless go
    (the rest is checked against the live server when the test runs)."""
    low, high = requirement.get("minServerVersion"), requirement.get("maxServerVersion")
    if isinstance(low, str) and parse_version(low) > TEST_SERVER_VERSION:
        return False
    if isinstance(high, str) and parse_version(high) < TEST_SERVER_VERSION:
        return False
    topologies = requirement.get("topologies")
    if isinstance(topologies, list) and not set(topologies) & set(TEST_SERVER_TOPOLOGIES):
        return False
    return requirement.get("serverless") != "require"


def runs_on_test_server(document: Mapping[str, Any], test: Mapping[str, Any]) -> bool:
    """Whether the file's and the test's runOnRequirements (and the absence of a skipReason) let the test run
    on the test server at all: a rule only takes tests that would otherwise run, so a test its own file
    excludes keeps that reason."""
    if test.get("skipReason") is not None:
        return False
    for requirements in (document.get("runOnRequirements"), test.get("runOnRequirements")):
        if isinstance(requirements, list) and requirements and not any(
            isinstance(item, Mapping) and _requirement_met(item) for item in requirements
        ):
            return False
    return True


@cache
def _file_document(path: Path) -> Any:
    """The file's plain JSON, a legacy file rewritten as the unified file it runs as."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return to_unified(document, path.stem) if is_legacy_file(document) else document


def profile_of(path: Path, index: int) -> TestProfile | None:
    """The profile of test ``index`` of the unified file at ``path`` (``None`` if it cannot be read, or if its
    requirements keep it off the test server anyway)."""
    document = _file_document(path)
    if not isinstance(document, Mapping):
        return None
    tests = document.get("tests")
    if not isinstance(tests, list) or not 0 <= index < len(tests) or not isinstance(tests[index], Mapping):
        return None
    if not runs_on_test_server(document, tests[index]):
        return None
    return TestProfile.of(document, tests[index])
