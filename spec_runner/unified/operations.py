"""The operation registry and the one path every operation takes: find its object, check its arguments, run
it, then check its result or error and save its result.

An operation is an async function registered for a name and the entity kinds it applies to::

    @operation("insertOne", object="collection", required=("document",), optional=("session", "comment"))
    async def insert_one(call: OperationCall) -> Any:
        result = await call.target.insert_one(call.arguments["document"], session=call.arguments.get("session"))
        return {"insertedId": result.inserted_id}

``call.target`` is the entity the operation runs on (``None`` for ``testRunner`` operations) and
``call.arguments`` the test's arguments with ``session`` already resolved to the session entity. The function
returns the result as the test format sees it (model objects turned into documents, iterables into lists).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from anyio.abc import TaskGroup

from spec_runner.unified.entities import EntityKind, EntityMap
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.expect import check_expected_error, describe_error
from spec_runner.unified.loader import Operation
from spec_runner.unified.matcher import MISSING, Matcher

TEST_RUNNER = "testRunner"

PROGRAMMING_ERRORS: tuple[type[Exception], ...] = (
    UnifiedTestError,
    AssertionError,
    NameError,
    AttributeError,
    ImportError,
    NotImplementedError,
    KeyError,
)
"""Exceptions that mean the runner or the test is wrong, never the outcome an operation is checked for."""


RUNNER_ENTITY_ARGUMENTS = ("client", "session", "thread", "topologyDescription")
"""The ``testRunner`` operations' arguments that name an existing entity."""


class UnsupportedOperation(UnifiedTestError):
    """No operation of that name is registered for the object's kind."""


class ResultShape(Enum):
    """How ``expectResult`` is matched against what the operation returned."""

    ROOT = "root"  # a document matched as a root-level document (extra top-level keys allowed), or a scalar
    DOCUMENTS = "documents"  # an array of root-level documents (find, aggregate, listIndexes, ...)
    VALUES = "values"  # an array of values matched with the nested rules (distinct)


@dataclass
class OperationContext:
    """What operations can reach: the test's entities, the backend running the test (``runner``: the
    driver-facing side with its internal client and fail points) and the registry its operations (and its
    threads' operations) are looked up in."""

    entities: EntityMap
    runner: Any = None
    registry: OperationRegistry = field(default_factory=lambda: default_registry())
    state: dict[str, Any] = field(default_factory=dict)
    # Where the test's thread entities run (``threads.thread_tasks``); ``None`` outside a running test.
    thread_tasks: TaskGroup | None = None

    @property
    def matcher(self) -> Matcher:
        return Matcher(self.entities)


@dataclass
class OperationCall:
    """One invocation: the operation as written, the object it runs on, and its prepared arguments."""

    context: OperationContext
    operation: Operation
    target: Any
    target_kind: str
    arguments: dict[str, Any]

    @property
    def entities(self) -> EntityMap:
        return self.context.entities


OperationFunction = Callable[[OperationCall], Awaitable[Any]]


@dataclass(frozen=True)
class OperationSpec:
    """A registered operation: its name, the object kinds it applies to and the arguments it accepts."""

    name: str
    objects: frozenset[str]
    function: OperationFunction
    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    any_arguments: bool = False  # e.g. runCommand-like operations that pass options through
    result: ResultShape = ResultShape.ROOT
    saves_as: EntityKind = EntityKind.BSON
    error_result: Callable[[BaseException], Any] | None = None  # the result an error carries, as a document

    def check_arguments(self, arguments: Mapping[str, Any]) -> None:
        missing = sorted(self.required - set(arguments))
        if missing:
            raise UnifiedTestError(f"{self.name}: missing required argument(s) {missing}")
        if not self.any_arguments:
            unknown = sorted(set(arguments) - self.required - self.optional)
            if unknown:
                raise UnifiedTestError(f"{self.name}: unsupported argument(s) {unknown}")


class OperationRegistry:
    """Operations by object kind and name."""

    def __init__(self) -> None:
        self._operations: dict[tuple[str, str], OperationSpec] = {}

    def register(self, spec: OperationSpec) -> None:
        for kind in spec.objects:
            key = (kind, spec.name)
            if key in self._operations:
                raise ValueError(f"operation {spec.name!r} is already registered for {kind}")
            self._operations[key] = spec

    def operation(
        self,
        name: str,
        *,
        object: str | Iterable[str],
        required: Iterable[str] = (),
        optional: Iterable[str] = (),
        any_arguments: bool = False,
        result: ResultShape = ResultShape.ROOT,
        saves_as: EntityKind = EntityKind.BSON,
        error_result: Callable[[BaseException], Any] | None = None,
    ) -> Callable[[OperationFunction], OperationFunction]:
        """Register the decorated function as operation ``name`` on ``object`` (an entity kind such as
        ``"collection"``, several of them, or ``"testRunner"``).

        ``error_result`` turns an error into the partial result ``expectError.expectResult`` is matched
        against (a bulk write error's write result), or returns ``MISSING``."""
        kinds = frozenset([object] if isinstance(object, str) else object)
        known = {k.value for k in EntityKind} | {TEST_RUNNER}
        if not kinds or not kinds <= known:
            raise ValueError(f"operation {name!r}: unknown object kind(s) {sorted(kinds - known)}")

        def decorate(function: OperationFunction) -> OperationFunction:
            self.register(
                OperationSpec(
                    name=name,
                    objects=kinds,
                    function=function,
                    required=frozenset(required),
                    optional=frozenset(optional),
                    any_arguments=any_arguments,
                    result=result,
                    saves_as=saves_as,
                    error_result=error_result,
                )
            )
            return function

        return decorate

    def lookup(self, kind: str, name: str) -> OperationSpec:
        try:
            return self._operations[(kind, name)]
        except KeyError:
            raise UnsupportedOperation(f"unsupported operation {name!r} on a {kind}") from None

    def names(self, kind: str) -> list[str]:
        return sorted(name for k, name in self._operations if k == kind)


REGISTRY: OperationRegistry = OperationRegistry()
operation = REGISTRY.operation
"""Register an operation in the default registry (``@operation("insertOne", object="collection", ...)``)."""


def default_registry() -> OperationRegistry:
    """The registry ``@operation`` registers in."""
    return REGISTRY


def prepare(
    context: OperationContext, op: Operation, registry: OperationRegistry | None = None
) -> tuple[OperationSpec, OperationCall]:
    """Find the operation for ``op.object`` and prepare its call (raises for unknown objects, operations and
    arguments, or a ``session`` argument that is not a session entity)."""
    if op.object == TEST_RUNNER:
        target, kind = None, TEST_RUNNER
    else:
        entity = context.entities.entity(op.object)
        target, kind = entity.value, entity.kind.value
    spec = (registry or context.registry).lookup(kind, op.name)
    arguments = dict(op.arguments)
    if kind == TEST_RUNNER:
        # An entity the operation names must exist, whatever else is wrong with its arguments.
        for key in RUNNER_ENTITY_ARGUMENTS:
            if isinstance(arguments.get(key), str):
                context.entities.entity(arguments[key])
    spec.check_arguments(arguments)
    if "session" in arguments:
        arguments["session"] = context.entities.session(arguments["session"])
    return spec, OperationCall(
        context=context, operation=op, target=target, target_kind=kind, arguments=arguments
    )


async def execute(context: OperationContext, op: Operation, registry: OperationRegistry | None = None) -> Any:
    """Run one operation and check it as the test says; returns the result (``MISSING`` after an error).

    Errors of the test itself (``UnifiedTestError``, a failed assertion) and of the runner's own code
    (``PROGRAMMING_ERRORS``) propagate, so a broken operation can never pass for an expected error; any
    other exception is the operation's error, checked against ``expectError`` or, without it, reported as
    unexpected.
    """
    spec, call = prepare(context, op, registry)
    result: Any = MISSING
    error: Exception | None = None
    try:
        result = await spec.function(call)
    except PROGRAMMING_ERRORS:
        raise
    except Exception as exc:
        error = exc
    check_outcome(context, op, spec, result, error)
    return result


def check_outcome(
    context: OperationContext, op: Operation, spec: OperationSpec, result: Any, error: Exception | None
) -> None:
    """The checks after an operation ran: ``ignoreResultAndError``, ``expectError``, ``expectResult`` and
    ``saveResultAsEntity``."""
    if op.ignore_result_and_error:
        return
    if op.expect_error is not None:
        described = None
        if error is not None:
            described = describe_error(error)
            if spec.error_result is not None and described.partial_result is MISSING:
                described.partial_result = spec.error_result(error)
        check_expected_error(op.expect_error, described, entities=context.entities)
        return
    if error is not None:
        raise MatchError(
            f"operation {op.name} on {op.object}", f"unexpected error {type(error).__name__}: {error}"
        ) from error
    if op.expect_result is not MISSING:
        context.matcher.match(
            op.expect_result,
            result,
            root=True,
            root_elements=spec.result is ResultShape.DOCUMENTS,
            path=f"{op.name}.result",
        )
    if op.save_result_as_entity is not None:
        if result is MISSING:
            raise UnifiedTestError(f"{op.name} returned no result to save as {op.save_result_as_entity!r}")
        context.entities.add(op.save_result_as_entity, spec.saves_as, result)
