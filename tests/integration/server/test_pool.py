"""The pool with real connections to the test server (TCP, handshake): limits, interruption, fail points.

The cmap-format files that the specification marks ``integration`` run here a second time, with the
driver's own connection factory and the server's real ``failCommand`` fail point on the handshake instead
of the mock factory of the spec suite.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest
from spec_runner.model import specs_root
from spec_runner.suites.connection_monitoring_and_pooling import CmapTestRunner, HandshakeFailPoint
from spec_runner.task_census import running_tasks, tasks_started_since

from mongio.connection.connection import Connection
from mongio.connection.pool import Pool, PoolClearedError
from mongio.connection.pool_options import PoolOptions
from mongio.errors import AutoReconnect
from tests.support.backends import gather_outcomes
from tests.support.direct_connections import CountingEstablisher, admin_command

pytestmark = pytest.mark.server

CMAP_DIR = specs_root() / "connection-monitoring-and-pooling" / "tests" / "cmap-format"


@pytest.fixture
async def fail_points(server_address: tuple[str, int]) -> AsyncIterator[list[str]]:
    """Names of fail points a test turned on; all are turned off afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        await admin_command(server_address, {"configureFailPoint": name, "mode": "off"})


async def test_many_tasks_share_a_bounded_number_of_server_connections(
    server_address: tuple[str, int],
) -> None:
    before = running_tasks()
    factory = CountingEstablisher(server_address, "poolBounded")
    pool: Pool[Connection] = Pool(
        server_address, factory, PoolOptions(max_pool_size=5, wait_queue_timeout=30)
    )
    pool.ready()
    most_open = 0

    async def ping() -> int:
        nonlocal most_open
        async with pool.checkout() as conn:
            most_open = max(most_open, factory.open)
            reply = await conn.command("admin", {"ping": 1})
            assert reply["ok"] == 1
            return conn.id

    ids = await gather_outcomes(*(ping() for _ in range(200)))
    assert set(ids) <= {1, 2, 3, 4, 5}
    assert most_open <= 5 and len(factory.made) <= 5
    assert pool.in_use_connection_count == 0
    await pool.close()
    assert factory.open == 0
    assert tasks_started_since(before) == []


async def test_interrupting_clear_ends_a_blocked_command_at_once(
    server_address: tuple[str, int], fail_points: list[str]
) -> None:
    appname = "poolInterruptInUse"
    await admin_command(
        server_address,
        {
            "configureFailPoint": "failCommand",
            "mode": "alwaysOn",
            "data": {
                "failCommands": ["ping"],
                "blockConnection": True,
                "blockTimeMS": 5000,
                "appName": appname,
            },
        },
    )
    fail_points.append("failCommand")
    factory = CountingEstablisher(server_address, appname)
    pool: Pool[Connection] = Pool(server_address, factory, PoolOptions())
    pool.ready()
    conn = await pool.check_out()
    outcome: list[object] = []
    ended = anyio.Event()

    async def blocked_ping() -> None:
        try:
            outcome.append(await conn.command("admin", {"ping": 1}))
        except AutoReconnect as error:
            outcome.append(error)
        finally:
            ended.set()

    async with anyio.create_task_group() as group:
        group.start_soon(blocked_ping)
        await anyio.sleep(0.2)
        assert not ended.is_set()
        pool.clear(interrupt_in_use_connections=True)
        with anyio.fail_after(4):  # well before the 5 s block ends
            await ended.wait()
    [error] = outcome
    assert isinstance(error, AutoReconnect) and "interrupted" in str(error)
    pool.check_in(conn)
    assert conn.closed and pool.total_connection_count == 0
    with pytest.raises(PoolClearedError):
        await pool.check_out()
    pool.ready()
    async with pool.checkout() as fresh:
        assert fresh is not conn
        assert (await fresh.command("admin", {"hello": 1}))["ok"] == 1
    await pool.close()


async def test_a_handshake_error_fails_the_check_out_and_frees_the_slot(
    server_address: tuple[str, int], fail_points: list[str]
) -> None:
    appname = "poolHandshakeError"
    await admin_command(
        server_address,
        {
            "configureFailPoint": "failCommand",
            "mode": {"times": 1},
            "data": {"failCommands": ["hello", "isMaster"], "closeConnection": True, "appName": appname},
        },
    )
    fail_points.append("failCommand")
    factory = CountingEstablisher(server_address, appname)
    pool: Pool[Connection] = Pool(server_address, factory, PoolOptions(max_pool_size=1))
    pool.ready()
    with pytest.raises(AutoReconnect):
        await pool.check_out()
    assert pool.total_connection_count == 0
    async with pool.checkout() as conn:
        assert (await conn.command("admin", {"ping": 1}))["ok"] == 1
    await pool.close()


class ServerCmapTestRunner(CmapTestRunner):
    """The spec suite's runner with the driver's connection factory and the server's own fail point."""

    def __init__(self, spec: Mapping[str, Any], address: tuple[str, int]) -> None:
        super().__init__(spec)
        self.fail_point = HandshakeFailPoint(None, None)  # the server applies the real one
        appname = (spec.get("poolOptions") or {}).get("appName") or "cmapIntegration"
        self.factory = CountingEstablisher(address, appname)

    async def _connect(self, connection_id: int, generation: int) -> Any:
        return await self.factory(connection_id, generation)


def integration_specs() -> list[Any]:
    specs = []
    for path in sorted(CMAP_DIR.glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        if spec.get("style") == "integration":
            specs.append(pytest.param(spec, id=path.stem))
    return specs


@pytest.mark.parametrize("spec", integration_specs())
async def test_cmap_integration_file_against_the_server(
    spec: dict[str, Any], server_address: tuple[str, int], fail_points: list[str]
) -> None:
    if "failPoint" in spec:
        await admin_command(server_address, spec["failPoint"])
        fail_points.append(spec["failPoint"]["configureFailPoint"])
    runner = ServerCmapTestRunner(spec, server_address)
    await runner.run()
    # The runner closed the pool: only the connections its threads kept checked out are still open.
    assert runner.factory.open == runner.pool.in_use_connection_count
    for conn in runner.factory.made:
        conn.close()
