"""The memory benchmark measures what it says, against the test server."""

from __future__ import annotations

import pytest
from benchmarks.memory_bench import format_table, load_result, measure, open_sockets

pytestmark = pytest.mark.server


async def test_each_measure_gives_a_positive_figure_per_driver(server_uri: str) -> None:
    await load_result(server_uri, 1)
    before = open_sockets()
    figures = {
        **await measure("per_client", "mongio", server_uri),
        **await measure("per_connection", "mongio", server_uri),
        **await measure("iterate_result", "mongio", server_uri),
    }
    assert set(figures) == {
        "per_client", "per_connection", "iterate_result_tracemalloc", "iterate_result_maxrss"
    }  # fmt: skip
    # A 1 MiB result decodes to more than 1 MiB of Python objects, all of which the peak includes.
    assert figures["iterate_result_tracemalloc"] > 1024 * 1024
    assert figures["per_client"] > 0 and figures["per_connection"] > 0
    # Every client the measures opened is closed again: no socket is left behind.
    assert open_sockets() <= before
    table = format_table({task: {"mongio": [value]} for task, value in figures.items()})
    assert [line.split()[0] for line in table.splitlines()[1:]] == sorted(figures, key=list(figures).index)
