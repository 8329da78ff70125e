"""The runner's own errors: a malformed or unsupported test file or an entity misuse is a test error, never
a mismatch, so they are kept apart from the assertion failures ``MatchError`` reports."""

from __future__ import annotations


class UnifiedTestError(Exception):
    """The test file asks for something the runner must refuse (unknown operator, operation or argument,
    bad hex string, placeholder in the wrong place, ...)."""


class InvalidTestFile(UnifiedTestError):
    """The file does not follow the unified test format's schema; ``problems`` lists each violation."""

    def __init__(self, path: str, problems: list[str]) -> None:
        shown = "; ".join(problems[:5]) + (f"; ... ({len(problems)} problems)" if len(problems) > 5 else "")
        super().__init__(f"{path}: not a valid unified test file: {shown}")
        self.problems = problems


class UnsupportedSchemaVersion(UnifiedTestError):
    """The file's ``schemaVersion`` is of another major version, or a newer minor one, than the runner's."""


class EntityError(UnifiedTestError):
    """An entity name that is unknown, already taken, or names an entity of another kind."""


class MatchError(AssertionError):
    """An expected value did not match the actual one; ``path`` locates the difference
    (``reply.cursor.firstBatch[0].x``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.reason = message
