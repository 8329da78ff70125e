"""The hostile-case report: one real case measured in a client process of its own, and the verdict of a row."""

from __future__ import annotations

from benchmarks import hostile_report


async def test_a_case_is_measured_in_a_client_process_of_its_own() -> None:
    result = await hostile_report.measure(hostile_report.CASES_BY_NAME["header length 5"])
    assert result["ok"] is True
    assert result["text"].startswith("ProtocolError: ")
    assert "length 5" in result["text"]
    assert 0 <= result["seconds"] < hostile_report.PATIENCE
    assert result["growth"] >= 0


def test_a_row_meets_the_targets_only_when_the_case_ended_as_it_should_within_them() -> None:
    case = hostile_report.CASES_BY_NAME["invalid UTF-8"]
    good = {"ok": True, "seconds": 0.002, "text": "InvalidBSON: x", "growth": 1_000_000}
    assert hostile_report.row(case, good) == "| invalid UTF-8 | 2.0 ms | 1.0 MB | yes | InvalidBSON: x |"
    for change in ({"ok": False}, {"seconds": 1.5}, {"growth": 64_000_000}):
        assert "| NO |" in hostile_report.row(case, {**good, **change})
