"""The memory benchmark measures what it says, against the test server."""

from __future__ import annotations

import pytest
from benchmarks.memory_bench import format_table, load_result, measure, open_sockets, run_measurement

pytestmark = pytest.mark.server


async def test_each_measure_gives_a_positive_figure_per_driver(server_uri: str) -> None:
    await load_result(server_uri, 1)
    before = open_sockets()
    # RSS growth is measured, as the benchmark does, in a fresh interpreter: in this long-lived one, freed
    # memory is reused and a client may add no resident page at all.
    figures = {
        **run_measurement("per_client", "mongio", server_uri),
        **run_measurement("per_connection", "mongio", server_uri),
        **await measure("iterate_result", "mongio", server_uri),
    }
    assert set(figures) == {
        "per_client", "per_connection", "iterate_result_tracemalloc", "iterate_result_maxrss"
    }  # fmt: skip
    # A 1 MiB result decodes to more than 1 MiB of Python objects, all of which the peak includes.
    assert figures["iterate_result_tracemalloc"] > 1024 * 1024
    assert figures["per_client"] > 0 and figures["per_connection"] > 0
    # The client the in-process measure opened is closed again: no socket is left behind.
    assert open_sockets() <= before
    table = format_table({task: {"mongio": [value]} for task, value in figures.items()})
    assert [line.split()[0] for line in table.splitlines()[1:]] == sorted(figures, key=list(figures).index)
