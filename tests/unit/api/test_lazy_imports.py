"""``import mongio`` leaves the rarely used subsystems unimported until first use, and every name they provide
is still reachable by attribute and by ``from ... import``."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Modules a program that connects without credentials and runs CRUD operations never needs.
LAZY_MODULES = (
    "cryptography",
    "mongio.connection.ocsp",
    "mongio.bson.json_util",
    "mongio.change_stream",
    "mongio.connection.socks",
    "mongio.encryption.client_encryption",
    "mongio.encryption.libmongocrypt",
    "mongio.connection.auth.scram",
    "mongio.events.cmap",
    "mongio.options.srv",
    "mongio.pymongo_types",
    "mongio.topology.sdam_events",
    "mongio.topology.srv_polling",
    "pymongocrypt",
    "python_socks",
)


def test_import_mongio_and_making_a_client_leave_the_lazy_modules_unimported() -> None:
    probe = (
        "import sys, mongio\n"
        "mongio.MongoClient('mongodb://127.0.0.1:1/', connect=False).db.c.find({})\n"
        f"print(sorted(name for name in {LAZY_MODULES!r} if name in sys.modules))\n"
    )
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("package", "name", "module"),
    [
        ("mongio.bson", "json_util", "mongio.bson.json_util"),
        ("mongio.events", "PoolCreatedEvent", "mongio.events.cmap"),
        ("mongio.events", "ConnectionCheckedInEvent", "mongio.events.cmap"),
        ("mongio.topology.heartbeat_events", "ServerHeartbeatFailedEvent", "mongio.topology.sdam_events"),
    ],
)
def test_a_lazy_name_resolves_in_a_fresh_interpreter(package: str, name: str, module: str) -> None:
    probe = (
        f"import sys, {package} as package\n"
        f"assert {module!r} not in sys.modules\n"
        f"value = getattr(package, {name!r})\n"
        f"from {package} import {name} as imported\n"
        f"assert imported is value and {name!r} in dir(package)\n"
        f"print(getattr(value, '__module__', None) or value.__name__)\n"
    )
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == module


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import mongio.bson
    import mongio.events

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        mongio.bson.nothing_here  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'NoSuchEvent'"):
        mongio.events.NoSuchEvent  # noqa: B018
