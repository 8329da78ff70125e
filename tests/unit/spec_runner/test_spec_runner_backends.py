"""The spec runner's backend parameter: cases run on asyncio or on trio, as ``--backend`` says."""

from __future__ import annotations

from typing import Any

import pytest
import sniffio
from spec_runner import __main__ as cli
from spec_runner.model import RunContext, SpecCase
from spec_runner.runner import Report, run_async, run_case_sync


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_async_runs_on_the_backend_named(backend: str) -> None:
    seen: list[str] = []

    async def body(tag: str) -> None:
        seen.append(f"{tag} on {sniffio.current_async_library()}")

    run_async(body, "case", backend=backend)
    assert seen == [f"case on {backend}"]


def test_an_unknown_backend_is_refused_naming_the_choices() -> None:
    async def body() -> None:
        raise AssertionError("must not run")

    with pytest.raises(ValueError, match="unknown backend 'curio': choose one of asyncio, trio"):
        run_async(body, backend="curio")


def test_a_coroutine_case_runs_on_trio_and_a_plain_one_in_no_loop() -> None:
    libraries: list[str | None] = []

    async def coroutine_case(context: RunContext) -> None:
        libraries.append(sniffio.current_async_library())

    def plain_case(context: RunContext) -> None:
        try:
            libraries.append(sniffio.current_async_library())
        except sniffio.AsyncLibraryNotFoundError:
            libraries.append(None)

    for body in (coroutine_case, plain_case):
        run_case_sync(SpecCase("suite", "file.json", body.__name__, body), RunContext(), "trio")
    assert libraries == ["trio", None]


def test_the_command_line_passes_its_backend_to_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    backends: list[str] = []

    def run(*args: Any, backend: str = "asyncio", **kwargs: Any) -> Report:
        backends.append(backend)
        return Report()

    monkeypatch.setattr(cli, "run", run)
    assert cli.main(["--uri", "mongodb://127.0.0.1:1/", "--backend", "trio", "crud"]) == 0
    assert cli.main(["--uri", "mongodb://127.0.0.1:1/", "crud"]) == 0
    assert backends == ["trio", "asyncio"]
    with pytest.raises(SystemExit):
        cli.main(["--backend", "curio", "crud"])
