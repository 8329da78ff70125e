"""What an application error means for the topology, decided without side effects.

When an operation fails, the executor describes the failure as an :class:`ApplicationError` and asks
:func:`application_error_decision` what to do. The answer (:class:`ErrorDecision`) says whether to mark the
server Unknown (and with which description), clear its pool, request an immediate check, or cancel the
check in progress; the ``Topology`` then carries it out while holding its lock, so clearing the pool and
replacing the description happen as one step.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mongio.errors import (
    SYSTEM_OVERLOADED_ERROR,
    ConnectionFailure,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    OperationTimeoutError,
    PoolClearedError,
    WaitQueueTimeoutError,
)
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.topology_description import TopologyDescription, compare_topology_version
from mongio.topology.topology_type import TopologyType

__all__ = [
    "NOT_WRITABLE_PRIMARY_CODES",
    "RECOVERING_CODES",
    "SHUTDOWN_CODES",
    "SYSTEM_OVERLOADED_LABEL",
    "ApplicationError",
    "ErrorDecision",
    "ErrorKind",
    "application_error_decision",
    "is_not_writable_primary",
    "is_recovering",
    "is_shutdown",
    "is_state_change_error",
]

RECOVERING_CODES = frozenset({11600, 11602, 13436, 189, 91})
NOT_WRITABLE_PRIMARY_CODES = frozenset({10107, 13435, 10058})
SHUTDOWN_CODES = frozenset({11600, 91})
SYSTEM_OVERLOADED_LABEL = SYSTEM_OVERLOADED_ERROR


def is_recovering(message: str | None, code: int | None) -> bool:
    """A "node is recovering" error: by code when there is one, else by message."""
    if code:
        return code in RECOVERING_CODES
    text = message or ""
    return "not master or secondary" in text or "node is recovering" in text


def is_not_writable_primary(message: str | None, code: int | None) -> bool:
    """A "not writable primary" error: by code when there is one, else by message."""
    if code:
        return code in NOT_WRITABLE_PRIMARY_CODES
    if is_recovering(message, None):
        return False
    return "not master" in (message or "")


def is_shutdown(code: int | None) -> bool:
    """A "node is shutting down" error, the only state-change errors that clear the pool."""
    return bool(code) and code in SHUTDOWN_CODES


def is_state_change_error(message: str | None, code: int | None) -> bool:
    """A "not writable primary" or "node is recovering" error: the server is not what we believed."""
    return is_recovering(message, code) or is_not_writable_primary(message, code)


class ErrorKind(enum.Enum):
    """How an operation failed, as far as the topology cares."""

    NETWORK = "network"  # a network error other than a timeout
    TIMEOUT = "timeout"  # a network timeout
    COMMAND = "command"  # the server answered with an error (ok: 0 or a writeConcernError)


@dataclass(frozen=True)
class ApplicationError:
    """An operation's failure as error handling needs to see it.

    ``generation`` is the pool generation of the connection the error happened on (for a failure while
    connecting, the pool's generation when the attempt started). ``completed_handshake`` is false when the
    error happened while establishing the connection (handshake or authentication).
    """

    kind: ErrorKind
    generation: int
    completed_handshake: bool
    code: int | None = None
    message: str = ""
    topology_version: Mapping[str, Any] | None = None
    labels: frozenset[str] = frozenset()
    service_id: Any = None
    error: BaseException | None = None

    @classmethod
    def from_reply(
        cls,
        reply: Mapping[str, Any],
        *,
        generation: int,
        completed_handshake: bool = True,
        service_id: Any = None,
        error: BaseException | None = None,
        labels: frozenset[str] = frozenset(),
    ) -> ApplicationError | None:
        """The error a command reply reports, or ``None`` when it reports none that SDAM looks at.

        An ``ok: 0`` reply is judged by its code and message; an ``ok: 1`` reply by its
        ``writeConcernError``. Errors inside ``writeErrors`` never count.
        """
        if not reply.get("ok"):
            source: Mapping[str, Any] = reply
        elif isinstance(reply.get("writeConcernError"), Mapping):
            source = reply["writeConcernError"]
        else:
            return None
        code = source.get("code")
        topology_version = reply.get("topologyVersion") or source.get("topologyVersion")
        labels = (
            labels | frozenset(reply.get("errorLabels") or ()) | frozenset(source.get("errorLabels") or ())
        )
        return cls(
            kind=ErrorKind.COMMAND,
            generation=generation,
            completed_handshake=completed_handshake,
            code=int(code) if code is not None else None,
            message=str(source.get("errmsg", "")),
            topology_version=topology_version,
            labels=labels,
            service_id=service_id,
            error=error,
        )

    @classmethod
    def from_exception(
        cls,
        error: BaseException,
        *,
        generation: int,
        completed_handshake: bool = True,
        service_id: Any = None,
    ) -> ApplicationError | None:
        """Classify a raised error; ``None`` for errors that never affect the topology."""
        if isinstance(error, OperationTimeoutError):
            return None  # the operation ran out of its own time: nothing new about the server
        labels = frozenset(getattr(error, "error_labels", ()) or ())
        if isinstance(error, OperationFailure):
            # ``details`` is the whole reply, or for a WriteConcernError the writeConcernError document.
            details = dict(error.details or {})
            if "ok" not in details and "writeConcernError" not in details:
                details["ok"] = 0
            if not details.get("ok"):
                details.setdefault("code", error.code)
                details.setdefault("errmsg", str(error))
            return cls.from_reply(
                details,
                generation=generation,
                completed_handshake=completed_handshake,
                service_id=service_id,
                error=error,
                labels=labels,
            )
        if isinstance(error, NotPrimaryError):
            # Raised for a state-change reply; its ``errors`` holds that reply.
            reply = error.errors if isinstance(error.errors, Mapping) else {}
            code = reply.get("code")
            return cls(
                kind=ErrorKind.COMMAND,
                generation=generation,
                completed_handshake=completed_handshake,
                code=int(code) if code is not None else None,
                message=str(reply.get("errmsg", "")) or str(error),
                topology_version=reply.get("topologyVersion"),
                labels=labels,
                service_id=service_id,
                error=error,
            )
        if isinstance(error, WaitQueueTimeoutError | PoolClearedError):
            return None  # the pool was busy or already cleared: nothing new about the server
        if isinstance(error, (NetworkTimeout, TimeoutError)):
            kind = ErrorKind.TIMEOUT
        elif isinstance(error, (ConnectionFailure, OSError)):
            kind = ErrorKind.NETWORK
        else:
            return None
        return cls(
            kind=kind,
            generation=generation,
            completed_handshake=completed_handshake,
            message=str(error),
            labels=labels,
            service_id=service_id,
            error=error,
        )


@dataclass(frozen=True)
class ErrorDecision:
    """What the topology does about one application error. Every field false/``None`` means: nothing.

    ``mark_unknown`` is the Unknown description to process through the normal update rules.
    ``clear_pool`` clears the server's pool (only the connections of ``service_id`` when it is set, in
    load-balanced mode). ``request_check`` wakes the server's monitor; ``cancel_check`` interrupts the
    check it may be running.
    """

    stale: bool = False
    mark_unknown: ServerDescription | None = None
    clear_pool: bool = False
    service_id: Any = None
    request_check: bool = False
    cancel_check: bool = False
    reason: str = field(default="", compare=False)

    @property
    def acts(self) -> bool:
        """Whether the decision asks the topology to do anything."""
        return self.mark_unknown is not None or self.clear_pool or self.request_check or self.cancel_check


_IGNORE = ErrorDecision(reason="the error says nothing about the server's state")


def application_error_decision(
    topology_description: TopologyDescription,
    address: Address,
    error: ApplicationError,
    pool_generation: int,
) -> ErrorDecision:
    """Decide how an application error updates the topology, per the SDAM error-handling rules.

    Errors from connections older than the pool's current generation, and state-change errors whose
    topologyVersion is not newer than the server's, are stale and change nothing. A state-change error
    marks the server Unknown (keeping the error's topologyVersion) and requests a check, and clears the pool
    only when the server is shutting down. A network error after the handshake, or any error before it
    completes, marks the server Unknown, clears the pool and cancels the running check, unless the pool
    labelled it ``SystemOverloadedError``. A network timeout after the handshake may be a slow operation,
    not a dead server: it changes nothing. Load-balanced topologies never mark the load balancer Unknown.
    """
    current = topology_description.get(address)
    if current is None:
        return ErrorDecision(stale=True, reason="the server is no longer in the topology")
    if error.generation < pool_generation:
        return ErrorDecision(stale=True, reason="the connection predates the last pool clear")
    if compare_topology_version(current.topology_version, error.topology_version) >= 0:
        return ErrorDecision(stale=True, reason="the server's topologyVersion is at least the error's")

    load_balanced = topology_description.topology_type == TopologyType.LoadBalanced
    if load_balanced and error.service_id is None:
        # Before or during the handshake (load balancer specification, "Initial Handshake Errors").
        return ErrorDecision(reason="load balanced: the error came before the handshake named the service")
    cause = error.error if error.error is not None else _describe(error)

    if error.kind == ErrorKind.COMMAND and is_state_change_error(error.message, error.code):
        unknown = None
        if not load_balanced:
            unknown = ServerDescription(address, error=cause, topology_version=error.topology_version)
        shutting_down = is_shutdown(error.code)
        return ErrorDecision(
            mark_unknown=unknown,
            clear_pool=shutting_down,
            service_id=error.service_id if load_balanced else None,
            request_check=not load_balanced,
            reason="node is shutting down" if shutting_down else "state change error",
        )

    if error.kind == ErrorKind.NETWORK or not error.completed_handshake:
        if SYSTEM_OVERLOADED_LABEL in error.labels:
            return ErrorDecision(reason="the pool marked the error as server overload")
        if not load_balanced:
            return ErrorDecision(
                mark_unknown=ServerDescription(address, error=cause),
                clear_pool=True,
                cancel_check=True,
                reason="network error" if error.completed_handshake else "error while connecting",
            )
        if error.service_id is not None:
            return ErrorDecision(clear_pool=True, service_id=error.service_id, reason="network error")
        return _IGNORE

    return _IGNORE


def _describe(error: ApplicationError) -> BaseException:
    if error.kind == ErrorKind.COMMAND:
        details: dict[str, Any] = {"ok": 0, "errmsg": error.message, "code": error.code}
        if error.topology_version is not None:
            details["topologyVersion"] = error.topology_version
        if error.code is not None and is_state_change_error(error.message, error.code):
            return NotPrimaryError(error.message or f"state change error {error.code}", details)
        return OperationFailure(error.message, error.code, details)
    if error.kind == ErrorKind.TIMEOUT:
        return NetworkTimeout(error.message or "network timeout")
    return ConnectionFailure(error.message or "network error")
