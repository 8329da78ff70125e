"""The size limits a server's hello announces, made sane at the source: believed up to a ceiling, and taken as
absent (the server default) when they are not positive integers."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.bson import Int64
from mongio.wire.header import (
    DEFAULT_MAX_BSON_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_MAX_WRITE_BATCH_SIZE,
    MAX_BSON_SIZE_CEILING,
    MAX_MESSAGE_SIZE_CEILING,
    MAX_WRITE_BATCH_SIZE_CEILING,
    ServerLimits,
    announced_limits,
)

DEFAULTS = ServerLimits(DEFAULT_MAX_BSON_SIZE, DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_MAX_WRITE_BATCH_SIZE)
CEILINGS = ServerLimits(MAX_BSON_SIZE_CEILING, MAX_MESSAGE_SIZE_CEILING, MAX_WRITE_BATCH_SIZE_CEILING)


def hello(value: Any) -> dict[str, Any]:
    return {"maxBsonObjectSize": value, "maxMessageSizeBytes": value, "maxWriteBatchSize": value, "ok": 1}


def test_what_a_real_server_announces_is_taken_as_it_is() -> None:
    real = {"maxBsonObjectSize": 16_777_216, "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000}
    assert announced_limits(real) == (16_777_216, 48_000_000, 100_000)
    small = {"maxBsonObjectSize": 1000, "maxMessageSizeBytes": 2000, "maxWriteBatchSize": 10}
    assert announced_limits(small) == (1000, 2000, 10)


def test_silence_gives_the_server_defaults() -> None:
    assert announced_limits({"ok": 1}) == DEFAULTS


def test_the_ceilings_leave_room_above_what_servers_announce_and_stay_under_what_a_length_holds() -> None:
    assert all(ceiling > default for ceiling, default in zip(CEILINGS, DEFAULTS, strict=True))
    assert (
        MAX_MESSAGE_SIZE_CEILING > MAX_BSON_SIZE_CEILING + 16 * 1024
    )  # a largest document still fits a message
    assert MAX_MESSAGE_SIZE_CEILING < 2**31 - 1


@pytest.mark.parametrize("claim", [10**12, Int64(2**62), 2**31 - 1, 1e12])
def test_a_claim_above_a_ceiling_is_lowered_to_it(claim: Any) -> None:
    assert announced_limits(hello(claim)) == CEILINGS


def test_a_claim_just_at_a_ceiling_stands() -> None:
    at = {
        "maxBsonObjectSize": CEILINGS[0],
        "maxMessageSizeBytes": CEILINGS[1],
        "maxWriteBatchSize": CEILINGS[2],
    }
    assert announced_limits(at) == CEILINGS


@pytest.mark.parametrize(
    "value",
    [0, -1, -(2**31), -1e9, 0.5, 4e7 + 0.5, float("nan"), float("inf"), True, "48000000", None, b"x", [1]],
)
def test_a_size_that_is_not_a_positive_integer_is_taken_as_absent(value: Any) -> None:
    assert announced_limits(hello(value)) == DEFAULTS


def test_a_whole_double_counts_as_its_integer() -> None:
    assert announced_limits(hello(40_000.0)) == (40_000, 40_000, 40_000)
