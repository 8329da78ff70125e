"""Listeners are recognised by their ancestry (mongio's, PyMongo's classes) or by the methods they define,
in a client's ``event_listeners`` or through ``mongio.monitoring.register``; anything else is refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import monitoring as pymongo_monitoring

from mongio import listener_registry, monitoring
from mongio.client import MongoClient
from mongio.events.command import CommandListener
from mongio.events.listeners import ConnectionPoolListener
from mongio.topology.heartbeat_events import (
    ServerHeartbeatFailedEvent,
    ServerHeartbeatListener,
    ServerListener,
    TopologyListener,
)


@pytest.fixture(autouse=True)
def empty_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(listener_registry, "_registered", [])
    yield


class Calls:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def record(self, name: str, event: Any) -> None:
        self.calls.append((name, event))


class PyMongoCommand(pymongo_monitoring.CommandListener, Calls):
    def started(self, event: Any) -> None:
        self.record("started", event)

    def succeeded(self, event: Any) -> None:
        self.record("succeeded", event)

    def failed(self, event: Any) -> None:
        self.record("failed", event)


class PyMongoHeartbeat(pymongo_monitoring.ServerHeartbeatListener, Calls):
    def started(self, event: Any) -> None:
        self.record("started", event)

    def succeeded(self, event: Any) -> None:
        self.record("succeeded", event)

    def failed(self, event: Any) -> None:
        self.record("failed", event)


class PyMongoServer(pymongo_monitoring.ServerListener, Calls):
    def opened(self, event: Any) -> None:
        self.record("opened", event)

    def description_changed(self, event: Any) -> None:
        self.record("description_changed", event)

    def closed(self, event: Any) -> None:
        self.record("closed", event)


class PyMongoTopology(pymongo_monitoring.TopologyListener):
    def opened(self, event: Any) -> None:
        pass

    def description_changed(self, event: Any) -> None:
        pass

    def closed(self, event: Any) -> None:
        pass


class PyMongoPool(pymongo_monitoring.ConnectionPoolListener):
    pass


class DuckCommand(Calls):
    def started(self, event: Any) -> None:
        self.record("started", event)

    def succeeded(self, event: Any) -> None:
        self.record("succeeded", event)

    def failed(self, event: Any) -> None:
        self.record("failed", event)


class DuckSdam:
    def opened(self, event: Any) -> None:
        pass

    def description_changed(self, event: Any) -> None:
        pass

    def closed(self, event: Any) -> None:
        pass


class BothKinds(CommandListener, pymongo_monitoring.ServerListener):
    def opened(self, event: Any) -> None:
        pass

    def description_changed(self, event: Any) -> None:
        pass

    def closed(self, event: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("listener", "kinds"),
    [
        (PyMongoCommand(), ("CommandListener",)),
        (PyMongoHeartbeat(), ("ServerHeartbeatListener",)),
        (PyMongoServer(), ("ServerListener",)),
        (PyMongoTopology(), ("TopologyListener",)),
        (PyMongoPool(), ("ConnectionPoolListener",)),
        (DuckCommand(), ("CommandListener",)),
        (BothKinds(), ("CommandListener", "ServerListener")),
        (ServerHeartbeatListener(), ("ServerHeartbeatListener",)),
    ],
)
def test_the_kind_comes_from_the_ancestry_or_the_methods(listener: object, kinds: tuple[str, ...]) -> None:
    assert listener_registry.listener_kinds(listener) == kinds


def test_each_adapted_listener_derives_from_mongios_class_of_its_kind() -> None:
    ours = CommandListener()
    adapted = listener_registry.adapt_listeners(
        [PyMongoCommand(), PyMongoHeartbeat(), PyMongoServer(), PyMongoTopology(), PyMongoPool(), ours]
    )
    bases = [CommandListener, ServerHeartbeatListener, ServerListener, TopologyListener, ConnectionPoolListener]
    assert [type(item).__mro__[1] for item in adapted[:5]] == bases
    assert adapted[5] is ours  # mongio's own listeners are used as they are


def test_an_adapter_forwards_each_event_to_the_listener() -> None:
    heartbeat = PyMongoHeartbeat()
    (adapter,) = listener_registry.adapt_listeners([heartbeat])
    assert isinstance(adapter, ServerHeartbeatListener)
    assert CommandListener not in type(adapter).__mro__
    event = ServerHeartbeatFailedEvent(0.5, ConnectionError("refused"), ("localhost", 27017))
    adapter.failed(event)
    assert heartbeat.calls == [("failed", event)]


def test_a_listener_both_kinds_is_delivered_as_each() -> None:
    both = BothKinds()
    adapted = listener_registry.adapt_listeners([both])
    assert adapted[0] is both
    assert isinstance(adapted[1], ServerListener)


@pytest.mark.parametrize("listener", [object(), DuckSdam(), "started"])
def test_what_is_no_listener_is_refused_naming_it(listener: object) -> None:
    with pytest.raises(TypeError, match=repr(listener)[:20].replace("(", r"\(").replace(".", r"\.")):
        MongoClient("mongodb://localhost", event_listeners=[listener])
    with pytest.raises(TypeError):
        monitoring.register(listener)


def test_register_applies_to_clients_made_afterwards_before_their_own_listeners() -> None:
    early = MongoClient("mongodb://localhost")
    registered = DuckCommand()
    monitoring.register(registered)
    own = CommandListener()
    late = MongoClient("mongodb://localhost", event_listeners=[own])
    assert all(getattr(item, "_target", None) is not registered for item in early._event_listeners)
    assert [getattr(item, "_target", item) for item in late._event_listeners] == [registered, own]
    assert listener_registry.registered_listeners() == (registered,)


def test_a_listener_of_several_of_mongios_classes_is_listed_once() -> None:
    # The kinds share method names (opened, started, ...) that take each kind's own event, so the type checker
    # refuses such a class; it is legal at runtime, and the registry must list each kind once.
    class Everything(  # type: ignore[misc]
        CommandListener, ServerListener, TopologyListener, ServerHeartbeatListener, ConnectionPoolListener
    ):
        pass

    everything = Everything()
    assert listener_registry.listener_kinds(everything) == (
        "CommandListener",
        "ServerListener",
        "TopologyListener",
        "ServerHeartbeatListener",
        "ConnectionPoolListener",
    )
    assert listener_registry.adapt_listeners([everything]) == [everything]
    assert listener_registry.adapt_listeners([everything, everything]) == [everything, everything]


def test_client_options_list_the_listeners_given_as_pymongo_lists_them() -> None:
    """As PyMongo's ``client.options.event_listeners``: the registered listeners, then the client's own, by
    kind (command, heartbeat, server, topology, pool), an object once per kind it is; the objects given, not
    the forwarders the client delivers through."""
    registered = PyMongoServer()
    monitoring.register(registered)
    pool, command, both, heartbeat = PyMongoPool(), DuckCommand(), BothKinds(), PyMongoHeartbeat()
    client = MongoClient("mongodb://localhost", event_listeners=[pool, command, both, heartbeat])
    assert client.options.event_listeners == [command, both, heartbeat, registered, both, pool]
    assert MongoClient("mongodb://localhost").options.event_listeners == [registered]
    # PyMongo's own list for listeners of its classes only (and none registered with it).
    given = [pool, PyMongoCommand(), PyMongoTopology(), heartbeat, PyMongoServer()]
    native: list[Any] = pymongo_monitoring._EventListeners(given).event_listeners()
    assert native == [given[1], heartbeat, given[4], given[2], pool]
    ours = MongoClient("mongodb://localhost", event_listeners=given).options.event_listeners
    assert ours == [*native[:2], registered, *native[2:]]  # the registered server listener first among servers
