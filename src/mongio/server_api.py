"""Declaring a stable API version for a client (the Stable API specification).

Pass a ``ServerApi`` to the client and every command it sends carries ``apiVersion`` (and ``apiStrict`` /
``apiDeprecationErrors`` when given), so the server answers as that API version promises::

    from mongio import AsyncMongoClient
    from mongio.server_api import ServerApi, ServerApiVersion

    client = AsyncMongoClient(uri, server_api=ServerApi(ServerApiVersion.V1, strict=True))

The declaration belongs to the client: databases, collections and operations cannot change it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServerApi", "ServerApiVersion"]


class ServerApiVersion:
    """The stable API versions this driver knows."""

    V1 = "1"
    """Version 1 of the stable API."""

    @classmethod
    def known(cls) -> frozenset[str]:
        """Every Stable API version this driver knows."""
        return frozenset({cls.V1})


class ServerApi:
    """A declared stable API version, given to the client as ``server_api``.

    ``version`` must be one of ``ServerApiVersion`` (an unknown version raises ``ValueError`` here, before
    anything is sent). ``strict=True`` makes the server refuse commands outside the API version;
    ``deprecation_errors=True`` makes it refuse deprecated ones. Left as ``None``, those fields are not sent
    and the server's defaults apply. Instances are immutable.
    """

    __slots__ = ("_deprecation_errors", "_strict", "_version")

    _version: str
    _strict: bool | None
    _deprecation_errors: bool | None

    def __init__(
        self, version: str, strict: bool | None = None, deprecation_errors: bool | None = None
    ) -> None:
        if not isinstance(version, str) or version not in ServerApiVersion.known():
            raise ValueError(
                f"Unknown ServerApi version: {version!r} (known: {', '.join(sorted(ServerApiVersion.known()))})"
            )
        for name, value in (("strict", strict), ("deprecation_errors", deprecation_errors)):
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"{name} must be True, False or None, not {type(value).__name__}")
        object.__setattr__(self, "_version", version)
        object.__setattr__(self, "_strict", strict)
        object.__setattr__(self, "_deprecation_errors", deprecation_errors)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ServerApi is immutable; cannot set {name!r}")

    @property
    def version(self) -> str:
        """The declared API version (``"1"``)."""
        return self._version

    @property
    def strict(self) -> bool | None:
        """Whether the server refuses commands outside the API version (``None``: not sent)."""
        return self._strict

    @property
    def deprecation_errors(self) -> bool | None:
        """Whether the server refuses deprecated commands (``None``: not sent)."""
        return self._deprecation_errors

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerApi):
            return NotImplemented
        return (self.version, self.strict, self.deprecation_errors) == (
            other.version,
            other.strict,
            other.deprecation_errors,
        )

    def __hash__(self) -> int:
        return hash((self.version, self.strict, self.deprecation_errors))

    def __repr__(self) -> str:
        return (
            f"ServerApi(version={self.version!r}, strict={self.strict!r}, "
            f"deprecation_errors={self.deprecation_errors!r})"
        )


def as_server_api(value: Any) -> ServerApi:
    """``value`` as mongio's :class:`ServerApi`: itself, or the same version and flags read from another
    library's (PyMongo's ``ServerApi``). Anything else raises ``TypeError``."""
    if isinstance(value, ServerApi):
        return value
    version = getattr(value, "version", None)
    if type(value).__name__ == "ServerApi" and isinstance(version, str):
        return ServerApi(
            version,
            strict=getattr(value, "strict", None),
            deprecation_errors=getattr(value, "deprecation_errors", None),
        )
    raise TypeError(
        f"server_api must be a ServerApi (e.g. ServerApi(ServerApiVersion.V1)), not {type(value).__name__}"
    )
