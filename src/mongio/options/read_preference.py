"""Read preferences: which members of a replica set a read may go to. Names follow PyMongo.

``ReadPreference.SECONDARY_PREFERRED`` or ``SecondaryPreferred(tag_sets=[{"dc": "ny"}, {}],
max_staleness=120)``. ``mode`` is numbered as PyMongo numbers it (primary 0 ... nearest 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mongio.errors import ConfigurationError
from mongio.options.pymongo_classes import is_pymongo_read_preference

__all__ = [
    "Nearest",
    "Primary",
    "PrimaryPreferred",
    "ReadPreference",
    "ReadPreferenceMode",
    "Secondary",
    "SecondaryPreferred",
    "make_read_preference",
    "read_pref_mode_from_name",
]

_MODE_NAMES = ("primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest")


def _validate_tag_sets(tag_sets: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    if tag_sets is None:
        return None
    if isinstance(tag_sets, Mapping) or not isinstance(tag_sets, Sequence):
        raise ConfigurationError(f"tag_sets must be a list of dictionaries, not {tag_sets!r}")
    result = []
    for tag_set in tag_sets:
        if not isinstance(tag_set, Mapping):
            raise ConfigurationError(f"each tag set must be a dictionary, not {tag_set!r}")
        result.append(dict(tag_set))
    return result


def _validate_max_staleness(max_staleness: Any) -> int:
    if isinstance(max_staleness, bool) or not isinstance(max_staleness, int):
        raise ConfigurationError(f"max_staleness must be an integer number of seconds, not {max_staleness!r}")
    if max_staleness != -1 and max_staleness <= 0:
        raise ConfigurationError(f"max_staleness must be -1 (no maximum) or positive, not {max_staleness}")
    return max_staleness


class ReadPreferenceMode:
    """What the five read preference modes (:class:`Primary` ... :class:`Nearest`) share: the type of every
    ``read_preference`` (PyMongo's private base class of the modes under a public name)."""

    __slots__ = ("_hedge", "_max_staleness", "_mode", "_tag_sets")

    def __init__(
        self,
        mode: int,
        tag_sets: Sequence[Mapping[str, Any]] | None = None,
        max_staleness: int = -1,
        hedge: Mapping[str, Any] | None = None,
    ) -> None:
        self._mode = mode
        self._tag_sets = _validate_tag_sets(tag_sets)
        self._max_staleness = _validate_max_staleness(max_staleness)
        if hedge is not None and not isinstance(hedge, Mapping):
            raise ConfigurationError(f"hedge must be a dictionary, not {hedge!r}")
        self._hedge = dict(hedge) if hedge is not None else None
        if mode == 0:
            if self._tag_sets and any(self._tag_sets):
                raise ConfigurationError(
                    f"read preference primary cannot be combined with tags {self._tag_sets!r}"
                )
            if self._max_staleness != -1:
                raise ConfigurationError(
                    f"read preference primary cannot be combined with maxStalenessSeconds={self._max_staleness}"
                )

    @property
    def mode(self) -> int:
        """The mode as PyMongo's int (``Primary`` is 0, ``Nearest`` is 4)."""
        return self._mode

    @property
    def name(self) -> str:
        """The class name, e.g. ``"SecondaryPreferred"``."""
        return type(self).__name__

    @property
    def mongos_mode(self) -> str:
        """The mode as the server spells it, e.g. ``"secondaryPreferred"``."""
        return _MODE_NAMES[self._mode]

    @property
    def tag_sets(self) -> list[dict[str, Any]]:
        """The tag sets, tried in order; ``[{}]`` (any server) by default."""
        return [dict(tags) for tags in self._tag_sets] if self._tag_sets else [{}]

    @property
    def max_staleness(self) -> int:
        """Maximum replication lag in seconds, or -1 for no maximum."""
        return self._max_staleness

    @property
    def hedge(self) -> dict[str, Any] | None:
        """The hedged read options, or ``None``."""
        return dict(self._hedge) if self._hedge is not None else None

    @property
    def min_wire_version(self) -> int:
        """The lowest wire version a server needs to honour this preference (5 with maxStalenessSeconds)."""
        return 5 if self._max_staleness != -1 else 0

    @property
    def document(self) -> dict[str, Any]:
        """The ``$readPreference`` document."""
        doc: dict[str, Any] = {"mode": self.mongos_mode}
        if self._tag_sets not in (None, [{}]):
            doc["tags"] = self.tag_sets
        if self._max_staleness != -1:
            doc["maxStalenessSeconds"] = self._max_staleness
        if self._hedge is not None:
            doc["hedge"] = dict(self._hedge)
        return doc

    def __eq__(self, other: object) -> bool:
        # PyMongo's modes too: their __eq__ answers NotImplemented for ours, so Python asks this one and the
        # two compare equal both ways. The hedge is read from the document, where PyMongo's gives it without
        # its deprecation warning.
        if not isinstance(other, ReadPreferenceMode) and not is_pymongo_read_preference(other):
            return NotImplemented
        theirs: Any = other
        return (self._mode, self.tag_sets, self._max_staleness, self.document.get("hedge")) == (
            theirs.mode,
            theirs.tag_sets,
            theirs.max_staleness,
            theirs.document.get("hedge"),
        )

    def __hash__(self) -> int:
        return hash((self._mode, repr(self.tag_sets), self._max_staleness))

    def __repr__(self) -> str:
        return f"{self.name}(tag_sets={self.tag_sets!r}, max_staleness={self._max_staleness!r}, hedge={self._hedge!r})"


class Primary(ReadPreferenceMode):
    """Read from the primary only (the default)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0)

    def __repr__(self) -> str:
        return "Primary()"


class PrimaryPreferred(ReadPreferenceMode):
    """Read from the primary, or from an eligible secondary when there is no primary."""

    __slots__ = ()

    def __init__(
        self,
        tag_sets: Sequence[Mapping[str, Any]] | None = None,
        max_staleness: int = -1,
        hedge: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(1, tag_sets, max_staleness, hedge)


class Secondary(ReadPreferenceMode):
    """Read from eligible secondaries only."""

    __slots__ = ()

    def __init__(
        self,
        tag_sets: Sequence[Mapping[str, Any]] | None = None,
        max_staleness: int = -1,
        hedge: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(2, tag_sets, max_staleness, hedge)


class SecondaryPreferred(ReadPreferenceMode):
    """Read from an eligible secondary, or from the primary when there is none."""

    __slots__ = ()

    def __init__(
        self,
        tag_sets: Sequence[Mapping[str, Any]] | None = None,
        max_staleness: int = -1,
        hedge: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(3, tag_sets, max_staleness, hedge)


class Nearest(ReadPreferenceMode):
    """Read from any eligible member within the latency window."""

    __slots__ = ()

    def __init__(
        self,
        tag_sets: Sequence[Mapping[str, Any]] | None = None,
        max_staleness: int = -1,
        hedge: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(4, tag_sets, max_staleness, hedge)


_ServerMode = ReadPreferenceMode
"""PyMongo's name for :class:`ReadPreferenceMode`, which the driver's own modules use."""


class ReadPreference:
    """The five modes with their default settings, as PyMongo names them."""

    PRIMARY: ReadPreferenceMode = Primary()
    PRIMARY_PREFERRED: ReadPreferenceMode = PrimaryPreferred()
    SECONDARY: ReadPreferenceMode = Secondary()
    SECONDARY_PREFERRED: ReadPreferenceMode = SecondaryPreferred()
    NEAREST: ReadPreferenceMode = Nearest()


def read_pref_mode_from_name(name: str) -> int:
    """``"secondaryPreferred"`` -> 3; raises :class:`~mongio.errors.ConfigurationError` for an unknown name."""
    for mode, known in enumerate(_MODE_NAMES):
        if known.lower() == name.lower():
            return mode
    raise ConfigurationError(f"readPreference {name!r} is not one of {', '.join(_MODE_NAMES)}")


def make_read_preference(
    mode: int, tag_sets: Sequence[Mapping[str, Any]] | None = None, max_staleness: int = -1
) -> ReadPreferenceMode:
    """The read preference object for a mode number and its settings."""
    if mode == 0:
        if (tag_sets and any(tag_sets)) or max_staleness != -1:
            raise ConfigurationError(
                "read preference primary cannot be combined with tags or maxStalenessSeconds"
            )
        return Primary()
    if mode == 1:
        return PrimaryPreferred(tag_sets, max_staleness)
    if mode == 2:
        return Secondary(tag_sets, max_staleness)
    if mode == 3:
        return SecondaryPreferred(tag_sets, max_staleness)
    if mode == 4:
        return Nearest(tag_sets, max_staleness)
    raise ConfigurationError(f"read preference mode must be 0 to 4, not {mode!r}")


def as_read_preference(value: Any) -> ReadPreferenceMode:
    """``value`` as one of mongio's read preferences: itself, or the same mode, tag sets and staleness read
    from another library's read preference object (PyMongo's, which carries ``mode``, ``tag_sets`` and
    ``max_staleness`` as mongio's do). Anything else raises ``TypeError``."""
    if isinstance(value, ReadPreferenceMode):
        return value
    mode, tag_sets = getattr(value, "mode", None), getattr(value, "tag_sets", None)
    max_staleness = getattr(value, "max_staleness", None)
    if isinstance(mode, int) and 0 <= mode < len(_MODE_NAMES) and isinstance(max_staleness, int):
        return make_read_preference(mode, tag_sets, max_staleness)
    raise TypeError(f"read_preference must be a read preference such as ReadPreference.SECONDARY, not {value!r}")
