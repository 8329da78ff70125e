"""Which kind of listener an object is, the adapters that let any such object receive mongio's events, and
the listeners registered for every client made afterwards (:func:`register`, PyMongo's
``pymongo.monitoring.register``).

A listener is recognised by its class's ancestry or, failing that, by the methods it defines, so listeners
written against PyMongo's ``pymongo.monitoring`` base classes (or against none) work unchanged:

- a class in its ancestry named ``CommandListener``, ``ServerHeartbeatListener``, ``ServerListener``,
  ``TopologyListener`` or ``ConnectionPoolListener`` (mongio's, PyMongo's or Motor's) says the kind;
- otherwise ``started``/``succeeded``/``failed`` make a command listener and the eleven pool methods a
  connection pool listener. ``opened``/``description_changed``/``closed`` alone cannot tell a server
  listener from a topology listener, so such an object must derive from one of the two classes.

Anything else is refused with a :class:`TypeError` naming it, when the client is made or at ``register``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mongio.events.command import CommandListener
from mongio.events.listeners import ConnectionPoolListener
from mongio.topology.heartbeat_events import ServerHeartbeatListener, ServerListener, TopologyListener

__all__ = ["adapt_listeners", "listed_by_kind", "listener_kinds", "register", "registered_listeners"]

# Each kind's base class, keyed by the class name that marks it in a listener's ancestry.
_BASES: dict[str, type] = {
    "CommandListener": CommandListener,
    "ServerHeartbeatListener": ServerHeartbeatListener,
    "ServerListener": ServerListener,
    "TopologyListener": TopologyListener,
    "ConnectionPoolListener": ConnectionPoolListener,
}
_COMMAND_METHODS = ("started", "succeeded", "failed")
_SDAM_METHODS = ("opened", "description_changed", "closed")
_POOL_METHODS = (
    "pool_created",
    "pool_ready",
    "pool_cleared",
    "pool_closed",
    "connection_created",
    "connection_ready",
    "connection_closed",
    "connection_check_out_started",
    "connection_check_out_failed",
    "connection_checked_out",
    "connection_checked_in",
)
_METHODS: dict[str, tuple[str, ...]] = {
    "CommandListener": _COMMAND_METHODS,
    "ServerHeartbeatListener": _COMMAND_METHODS,
    "ServerListener": _SDAM_METHODS,
    "TopologyListener": _SDAM_METHODS,
    "ConnectionPoolListener": _POOL_METHODS,
}

# The order of kinds in PyMongo's list of a client's listeners.
_PYMONGO_ORDER = (
    "CommandListener",
    "ServerHeartbeatListener",
    "ServerListener",
    "TopologyListener",
    "ConnectionPoolListener",
)

_registered: list[object] = []


def _defines(listener: object, methods: tuple[str, ...]) -> bool:
    return all(callable(getattr(listener, name, None)) for name in methods)


def listener_kinds(listener: object) -> tuple[str, ...]:
    """The kinds (``"CommandListener"``, ``"ServerListener"``, ...) ``listener`` is; raises
    :class:`TypeError` when it is none, or when its methods alone cannot say which."""
    named = tuple(dict.fromkeys(cls.__name__ for cls in type(listener).__mro__ if cls.__name__ in _BASES))
    if named:
        return named
    if _defines(listener, _COMMAND_METHODS):
        return ("CommandListener",)
    if _defines(listener, _POOL_METHODS):
        return ("ConnectionPoolListener",)
    if _defines(listener, _SDAM_METHODS):
        raise TypeError(
            f"{listener!r} defines opened, description_changed and closed, which server listeners and topology "
            "listeners share: derive it from mongio.monitoring.ServerListener or TopologyListener"
        )
    raise TypeError(
        f"{listener!r} is not an event listener: it derives from none of mongio.monitoring's listener classes "
        "and does not define started/succeeded/failed (commands) or the connection pool listener's methods"
    )


def _adapter(kind: str, listener: object) -> object:
    """``listener`` as an instance of mongio's base class for ``kind``: itself when it is one already, else
    a forwarder calling the methods it defines."""
    base = _BASES[kind]
    if isinstance(listener, base):
        return listener
    forwarder: object = _FORWARDERS[kind](listener)
    return forwarder


def adapt_listeners(listeners: Iterable[object]) -> list[object]:
    """The listeners registered with :func:`register` followed by ``listeners``, each as one object per kind
    it is, deriving from mongio's base class for that kind (what the publishers look for)."""
    adapted: list[object] = []
    for listener in [*_registered, *listeners]:
        own: list[object] = []
        for kind in listener_kinds(listener):
            item = _adapter(kind, listener)
            # An object of several of mongio's classes is listed once: each publisher picks it by class.
            if not any(item is known for known in own):
                own.append(item)
        adapted.extend(own)
    return adapted


def listed_by_kind(listeners: Iterable[object]) -> tuple[object, ...]:
    """The listeners registered with :func:`register` followed by ``listeners``, as PyMongo lists a client's
    listeners: by kind (command, heartbeat, server, topology, pool), an object once for each kind it is.
    Raises :class:`TypeError` for an object that is no listener."""
    every = [(listener, listener_kinds(listener)) for listener in [*_registered, *listeners]]
    return tuple(listener for kind in _PYMONGO_ORDER for listener, kinds in every if kind in kinds)


def register(listener: object) -> None:
    """Register ``listener`` for every client made from now on (PyMongo's ``monitoring.register``); the
    client's own ``event_listeners`` come after it. Raises :class:`TypeError` for an object that is no
    listener."""
    listener_kinds(listener)
    _registered.append(listener)


def registered_listeners() -> tuple[object, ...]:
    """The listeners :func:`register` was given, in order."""
    return tuple(_registered)


def _forwarder_class(kind: str) -> type:
    def make_method(name: str) -> Any:
        def forward(self: Any, event: Any) -> None:
            getattr(self._target, name)(event)

        forward.__name__ = name
        return forward

    def __init__(self: Any, target: object) -> None:
        self._target = target

    namespace: dict[str, Any] = {name: make_method(name) for name in _METHODS[kind]}
    namespace["__init__"] = __init__
    namespace["__repr__"] = lambda self: f"<{kind} for {self._target!r}>"
    return type(f"_Forwarding{kind}", (_BASES[kind],), namespace)


_FORWARDERS: dict[str, type] = {kind: _forwarder_class(kind) for kind in _BASES}
