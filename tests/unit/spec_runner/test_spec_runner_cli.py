"""``python -m spec_runner``: which topologies a run covers, and what it reports for each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spec_runner.__main__ import TOPOLOGIES, main

# A suite that needs no server: the runner builds no deployment for it, whatever the topology.
SUITE = "bson-corpus/boolean.json"


def run_json(tmp_path: Path, *args: str) -> object:
    out = tmp_path / "report.json"
    assert main([*args, "--json", str(out), SUITE]) == 0
    return json.loads(out.read_text())


def test_without_uri_or_topology_every_topology_runs_with_a_table_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_json(tmp_path)
    assert isinstance(report, dict) and list(report) == list(TOPOLOGIES)
    assert all(result["suites"]["bson-corpus"]["passed"] > 0 for result in report.values())
    printed = capsys.readouterr().out
    assert [line for line in printed.splitlines() if line.startswith("== topology:")] == [
        f"== topology: {name}" for name in TOPOLOGIES
    ]


def test_one_topology_or_a_uri_runs_once(tmp_path: Path) -> None:
    one = run_json(tmp_path, "--topology", "sharded")
    assert isinstance(one, dict) and "suites" in one
    with_uri = run_json(tmp_path, "--uri", "mongodb://127.0.0.1:1/")
    assert isinstance(with_uri, dict) and "suites" in with_uri


def test_compressors_leave_out_the_test_server_which_cannot_compress(tmp_path: Path) -> None:
    report = run_json(tmp_path, "--compressors", "zlib")
    assert isinstance(report, dict) and list(report) == [name for name in TOPOLOGIES if name != "single"]
