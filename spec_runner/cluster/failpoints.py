"""``failCommand`` as a proxy applies it, per deployment member: the server's semantics, kept by the harness.

The harness answers ``configureFailPoint: "failCommand"`` itself at each member or mongos, so a fail point set
through one mongos fires only there (``targetedFailPoint``, ``useMultipleMongoses``). Other fail point names
go to the shared test server.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Codes the server labels RetryableWriteError on a retryable write (the Retryable Writes specification's list).
RETRYABLE_WRITE_CODES = frozenset({6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436})
# What the server calls transient inside a transaction (WriteConflict, LockTimeout,
# PreparedTransactionInProgress, the snapshot errors), beside NoSuchTransaction and the retryable codes.
TRANSIENT_CODES = frozenset({112, 24, 267, 239, 246, 133, 13388, 150})
NO_SUCH_TRANSACTION = 251
NOT_WRITABLE_PRIMARY = 10107
NOT_PRIMARY_NO_SECONDARY_OK = 13435

# The server's names of the codes fail points answer with (a real error reply carries its codeName).
CODE_NAMES = {
    1: "InternalError", 2: "BadValue", 6: "HostUnreachable", 7: "HostNotFound", 8: "UnknownError",
    18: "AuthenticationFailed", 24: "LockTimeout", 43: "CursorNotFound", 50: "MaxTimeMSExpired",
    51: "UnknownReplWriteConcern", 63: "StaleShardVersion", 64: "WriteConcernFailed", 89: "NetworkTimeout",
    91: "ShutdownInProgress", 112: "WriteConflict", 121: "DocumentValidationFailure",
    133: "FailedToSatisfyReadPreference", 134: "ReadConcernMajorityNotAvailableYet", 150: "StaleEpoch",
    189: "PrimarySteppedDown", 216: "ElectionInProgress", 234: "RetryChangeStream", 246: "SnapshotUnavailable",
    251: "NoSuchTransaction", 262: "ExceededTimeLimit", 267: "PreparedTransactionInProgress",
    280: "ChangeStreamFatalError", 359: "OperationNotSupportedInTransaction", 391: "ReauthenticationRequired",
    462: "IngressRequestRateLimitExceeded", 9001: "SocketException", 10107: "NotWritablePrimary",
    11000: "DuplicateKey", 11600: "InterruptedAtShutdown", 11601: "Interrupted",
    11602: "InterruptedDueToReplStateChange", 13435: "NotPrimaryNoSecondaryOk", 13436: "NotPrimaryOrSecondary",
    40324: "Location40324", 40573: "Location40573",
}  # fmt: skip

_HELLO_FAMILY = frozenset({"hello", "isMaster", "ismaster"})


def listed(name: str, fail_commands: Iterable[str]) -> bool:
    """Whether ``failCommands`` names the command: the server knows hello, isMaster and ismaster as one
    command, so any of those names matches all three."""
    names = set(fail_commands)
    if name in _HELLO_FAMILY:
        return bool(names & _HELLO_FAMILY)
    return name in names


@dataclass
class FailAction:
    """What one activation of ``failCommand`` does to one command."""

    block_seconds: float = 0.0
    close_connection: bool = False
    error: dict[str, Any] | None = None
    """The error reply to send instead of running the command."""
    write_concern_error: dict[str, Any] | None = None
    """Run the command, then attach this ``writeConcernError`` to a successful reply."""
    error_labels: list[str] | None = None


@dataclass
class FailCommand:
    """One member's ``failCommand`` fail point."""

    mode: Any = "off"
    data: dict[str, Any] = field(default_factory=dict)
    remaining: int | None = None
    skip: int = 0
    probability: float = 1.0
    rng: random.Random = field(default_factory=random.Random)

    @property
    def active(self) -> bool:
        return self.mode != "off" and (self.remaining is None or self.remaining > 0)

    def configure(self, command: Mapping[str, Any]) -> None:
        """Apply a ``configureFailPoint`` command (``mode``: ``alwaysOn``, ``off``, ``{times}``, ``{skip}``,
        ``{activationProbability}``; ``data``)."""
        mode = command.get("mode", "off")
        self.data = dict(command.get("data") or {})
        self.remaining = None
        self.skip = 0
        self.probability = 1.0
        if isinstance(mode, Mapping):
            if "times" in mode:
                self.remaining = int(mode["times"])
            if "skip" in mode:
                self.skip = int(mode["skip"])
            if "activationProbability" in mode:
                self.probability = float(mode["activationProbability"])
        elif mode not in ("alwaysOn", "off"):
            raise ValueError(f"failCommand: unknown mode {mode!r}")
        self.mode = mode

    def action_for(self, command: Mapping[str, Any], app_name: str | None) -> FailAction | None:
        """The action for ``command`` (counting the activation), or ``None`` when the fail point lets it by."""
        if not self.active or not self._matches(command, app_name):
            return None
        if self.skip > 0:
            self.skip -= 1
            return None
        if self.probability < 1.0 and self.rng.random() >= self.probability:
            return None
        if self.remaining is not None:
            self.remaining -= 1
        return self._action(command)

    def _matches(self, command: Mapping[str, Any], app_name: str | None) -> bool:
        if not listed(next(iter(command), ""), self.data.get("failCommands", ())):
            return False
        wanted_app = self.data.get("appName")
        return wanted_app is None or wanted_app == app_name

    def _action(self, command: Mapping[str, Any]) -> FailAction:
        data = self.data
        action = FailAction()
        if data.get("blockConnection"):
            action.block_seconds = float(data.get("blockTimeMS", 0)) / 1000
        action.close_connection = bool(data.get("closeConnection"))
        labels = data.get("errorLabels")
        if "errorCode" in data:
            code = int(data["errorCode"])
            error: dict[str, Any] = {"ok": 0.0, "code": code, "errmsg": "Failing command via 'failCommand' failpoint"}
            if code in CODE_NAMES:
                error["codeName"] = CODE_NAMES[code]
            if labels is None:
                labels = server_labels(command, code)
            if labels:
                error["errorLabels"] = list(labels)
            action.error = error
        elif "writeConcernError" in data:
            action.write_concern_error = dict(data["writeConcernError"])
            wce_code = int(action.write_concern_error.get("code", 0))
            if labels is None and wce_code in RETRYABLE_WRITE_CODES and is_retryable_write(command):
                labels = ["RetryableWriteError"]
            action.error_labels = list(labels) if labels else None
        elif labels:
            action.error_labels = list(labels)
        return action


def server_labels(command: Mapping[str, Any], code: int) -> list[str]:
    """The labels the server puts on an error ``code`` answering ``command`` (when the fail point gives none):
    RetryableWriteError on a retryable write, TransientTransactionError inside a transaction."""
    labels = []
    if code in RETRYABLE_WRITE_CODES and is_retryable_write(command):
        labels.append("RetryableWriteError")
    if in_transaction(command):
        ends = next(iter(command), "") in ("commitTransaction", "abortTransaction")
        transient = code in TRANSIENT_CODES or code == NO_SUCH_TRANSACTION
        if not ends:
            transient = transient or code in RETRYABLE_WRITE_CODES
        if transient:
            labels.append("TransientTransactionError")
    return labels


def in_transaction(command: Mapping[str, Any]) -> bool:
    return command.get("autocommit") is False


def transaction_key(command: Mapping[str, Any]) -> tuple[str, int] | None:
    """(session id, txnNumber) of a command in a transaction."""
    lsid = command.get("lsid")
    if not in_transaction(command) or not isinstance(lsid, Mapping):
        return None
    return repr(lsid.get("id")), int(command.get("txnNumber", 0))


_RETRYABLE_WRITE_COMMANDS = frozenset({"insert", "update", "delete", "findAndModify", "bulkWrite"})


def is_retryable_write(command: Mapping[str, Any]) -> bool:
    """A write the server would label retryable: a ``txnNumber`` outside a transaction, or the end of one."""
    name = next(iter(command), "")
    if name in ("commitTransaction", "abortTransaction"):
        return True
    return name in _RETRYABLE_WRITE_COMMANDS and "txnNumber" in command and "autocommit" not in command
