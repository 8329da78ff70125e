"""The examples run, and the embedded server they rely on starts, answers and stops cleanly."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mongio.connection.establish import ConnectionSettings, establish
from mongio.embedded import EmbeddedServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.server


def test_quickstart_prints_what_it_stored(server_uri: str) -> None:
    env = {**os.environ, "MONGODB_URI": server_uri}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py")], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "inserted 3 documents" in lines
    # the query sorts by birth year and filters out Ada; the aggregation counts speakers per language
    assert lines.index("  Grace (born 1906)") < lines.index("  Edsger (born 1930)")
    assert "  Ada (born 1815)" not in lines
    assert "  English: 3" in lines


async def test_embedded_server_serves_and_stops_without_leftover_tasks() -> None:
    before = asyncio.all_tasks()
    async with EmbeddedServer() as server:
        assert server.uri == f"mongodb://127.0.0.1:{server.port}/"
        conn = await establish(("127.0.0.1", server.port), ConnectionSettings())
        try:
            reply = await conn.command("admin", {"ping": 1})
            assert reply["ok"] == 1
        finally:
            conn.close()
    assert asyncio.all_tasks() == before
    assert server._process is None


async def test_embedded_server_that_exits_reports_its_output() -> None:
    with pytest.raises(RuntimeError, match="exited with"):
        await EmbeddedServer("--no-such-option").start()
