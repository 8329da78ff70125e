"""What the unified-format suites share: one test run against the server over the mongio backend.

Importing this module registers every driver-facing operation (the ``ops_*`` modules).
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import inspect
import os
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

import anyio

from spec_runner.model import CaseSkipped, RunContext, SpecCase, Suite
from spec_runner.raw_wire import command_once
from spec_runner.server import TestServer, external_uri, find_server_program
from spec_runner.unified import (
    ops_collection,
    ops_crud,
    ops_cursor,
    ops_encryption,
    ops_gridfs,
    ops_runner,
    ops_session,
    special,
)
from spec_runner.unified.backend import InternalClient, MongioBackend, server_facts
from spec_runner.unified.collect import unified_cases
from spec_runner.unified.loader import UnifiedTest, UnifiedTestFile
from spec_runner.unified.requirements import ServerFacts
from spec_runner.unified.runner import run_test, skip_reason

_TOKEN_FILE = "OIDC_TOKEN_FILE"

OPERATION_MODULES = (
    ops_collection,
    ops_crud,
    ops_cursor,
    ops_encryption,
    ops_gridfs,
    ops_runner,
    ops_session,
    special,
)
"""Imported for their ``@operation`` registrations."""

# After a "not writable primary" or "node is recovering" error (a fail point's) the server is Unknown until its
# monitor's next reply; with the streaming protocol that reply comes once per heartbeatFrequencyMS (a check
# request is ignored while the awaited hello is in progress), so an operation retried, a change stream resumed
# or a commit retried would wait 10 s for it. The unified format lets a runner lower heartbeatFrequencyMS for
# clients of tests that configure fail points, never for a client that sets it: suites whose tests do so take
# these as ``client_defaults`` (the smallest frequency the driver allows).
FAIL_POINT_RECOVERY: Mapping[str, Any] = MappingProxyType({"heartbeatFrequencyMS": 500})


async def run_unified(
    context: RunContext,
    test_file: UnifiedTestFile,
    test: UnifiedTest,
    *,
    standalone: bool = False,
    client_defaults: Mapping[str, Any] | None = None,
    auth: bool = False,
) -> None:
    """Run one test against ``context.uri``: its facts, a fresh runner connection and backend.

    With ``standalone``, a test whose requirements the run's server does not meet but which can run on a
    single server goes to the standalone server of ``standalone_uri`` instead; with ``auth``, one that needs
    authentication goes to the server of ``auth_uri``. ``client_defaults`` are URI options given to every
    client entity that does not set them. A MONGODB-OIDC test on the cluster harness runs against its
    ``oidc_uri``.
    """
    if context.uri is None:
        raise RuntimeError("the unified suites need a server (no URI in the run context)")
    deployment = context.deployment
    if deployment is not None and deployment.oidc is not None and _wants_oidc(test_file, test):
        # The harness's members speak MONGODB-OIDC: the runner and the test's clients authenticate with the
        # token file of its identity provider (ENVIRONMENT:test), for this test only.
        previous = os.environ.get(_TOKEN_FILE)
        os.environ[_TOKEN_FILE] = deployment.oidc.token_file
        try:
            await _run_unified_at(deployment.oidc_uri, context, test_file, test, standalone, client_defaults, auth)
        finally:
            if previous is None:
                os.environ.pop(_TOKEN_FILE, None)
            else:
                os.environ[_TOKEN_FILE] = previous
        return
    await _run_unified_at(context.uri, context, test_file, test, standalone, client_defaults, auth)


async def _run_unified_at(
    uri: str,
    context: RunContext,
    test_file: UnifiedTestFile,
    test: UnifiedTest,
    standalone: bool,
    client_defaults: Mapping[str, Any] | None,
    auth: bool,
) -> None:
    internal = InternalClient(uri)
    try:
        facts = await server_facts(internal)
        elsewhere: Callable[[], Awaitable[str]] | None = None
        if context.deployment is not None:
            pass  # a harness topology's table counts its own tests only
        elif auth and _wants_auth(test_file, test, facts):
            elsewhere = functools.partial(auth_uri, replica_set=_needs_replica_set(test_file, test))
        elif standalone and _wants_standalone(test_file, test, facts):
            elsewhere = standalone_uri
        if elsewhere is not None:
            await internal.close()
            uri = await elsewhere()
            internal = InternalClient(uri)
            facts = await server_facts(internal)
        backend = MongioBackend(uri, internal, facts, client_defaults, deployment=context.deployment)
        await run_test(test_file, test, facts=facts, backend=backend)
    finally:
        await internal.close()


def _wants_standalone(test_file: UnifiedTestFile, test: UnifiedTest, facts: ServerFacts) -> bool:
    if external_uri() is not None or facts.topology == "single":
        return False  # a deployment given from outside is the only one the tests may use
    if test.skip_reason is not None or skip_reason(test_file, test, facts) is None:
        return False
    requirements = [*(test_file.run_on_requirements or ()), *(test.run_on_requirements or ())]
    return any("single" in (requirement.get("topologies") or ()) for requirement in requirements)


def _wants_oidc(test_file: UnifiedTestFile, test: UnifiedTest) -> bool:
    requirements = [*(test_file.run_on_requirements or ()), *(test.run_on_requirements or ())]
    return any(requirement.get("authMechanism") == "MONGODB-OIDC" for requirement in requirements)


def _wants_auth(test_file: UnifiedTestFile, test: UnifiedTest, facts: ServerFacts) -> bool:
    if external_uri() is not None or facts.auth_enabled:
        return False
    if test.skip_reason is not None or skip_reason(test_file, test, facts) is None:
        return False
    requirements = [*(test_file.run_on_requirements or ()), *(test.run_on_requirements or ())]
    return any(requirement.get("auth") is True for requirement in requirements)


def _needs_replica_set(test_file: UnifiedTestFile, test: UnifiedTest) -> bool:
    """Whether every requirement that names topologies leaves out ``single`` (the test then needs a replica
    set member, e.g. retryable reads after a handshake error)."""
    requirements = [*(test_file.run_on_requirements or ()), *(test.run_on_requirements or ())]
    named = [requirement["topologies"] for requirement in requirements if requirement.get("topologies")]
    return bool(named) and not any("single" in topologies for topologies in named)


_STANDALONE: list[TestServer] = []


async def standalone_uri() -> str:
    """The URI of a standalone SecantusDB, started on first use and kept for the rest of the process (the
    ``single`` topology's tests, beside the run's replica set member)."""
    if not _STANDALONE:
        # Starting waits for the process to answer: done in a worker thread so the loop keeps running.
        server = await anyio.to_thread.run_sync(TestServer("--standalone").start)
        atexit.register(server.stop)
        _STANDALONE.append(server)
    return _STANDALONE[0].uri


AUTH_USER = "unified"
AUTH_PASSWORD = "unified-runner-password"


class _StoredServer(TestServer):
    """A test server on a storage path that survives a restart (``TestServer`` keeps its data in memory)."""

    def __init__(self, storage: str, *extra_args: str, port: int | None = None) -> None:
        super().__init__(*extra_args, port=port)
        self.storage = storage

    def start(self) -> _StoredServer:
        argv = [
            find_server_program(),
            "--host", self.host,
            "--port", str(self.port),
            "--storage-path", self.storage,
            "--enable-test-commands",
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_until_answering()
        return self


def _start_auth_server(replica_set: bool) -> _StoredServer:
    # SecantusDB takes its users from storage: made on a first start without --auth, then restarted with it.
    storage = tempfile.mkdtemp(prefix="secantus-unified-auth-")
    atexit.register(shutil.rmtree, storage, True)
    with _StoredServer(storage, "--standalone") as setup:
        command = {"createUser": AUTH_USER, "pwd": AUTH_PASSWORD, "roles": ["root"], "$db": "admin"}
        reply = command_once(setup.host, setup.port, command, timeout=10.0)
        if reply.get("ok") != 1:
            raise RuntimeError(f"creating the test user failed: {reply}")
        port = setup.port
    topology_args = () if replica_set else ("--standalone",)
    server = _StoredServer(storage, *topology_args, "--auth", port=port).start()
    atexit.register(server.stop)
    return server


_AUTH: dict[bool, _StoredServer] = {}


async def auth_uri(*, replica_set: bool = False) -> str:
    """The URI (with a root user's credentials) of a SecantusDB that requires authentication, a standalone or
    (``replica_set``) a one-member replica set, started on first use and kept for the rest of the process
    (the ``auth: true`` tests)."""
    if replica_set not in _AUTH:
        _AUTH[replica_set] = await anyio.to_thread.run_sync(_start_auth_server, replica_set)
    server = _AUTH[replica_set]
    return f"mongodb://{AUTH_USER}:{quote(AUTH_PASSWORD, safe='')}@{server.address}/?authSource=admin"


FailureCheck = Callable[[SpecCase, Exception], None]
"""Raises ``AssertionError`` when a case that had to fail failed for another reason than its file intends."""


def expecting_failure(case: SpecCase, check: FailureCheck | None = None) -> SpecCase:
    """For the format's ``valid-fail`` files: the case must fail, loading the file included, and (with
    ``check``) for the reason the file intends; one that passes, or fails otherwise, is the failure."""
    body = case.run

    async def run(context: RunContext) -> None:
        try:
            result = body(context)
            if inspect.isawaitable(result):
                await result
        except CaseSkipped:
            raise
        except Exception as exc:
            if check is not None:
                check(case, exc)
            return
        raise AssertionError(f"{case.name!r} was expected to fail, but it passed")

    return dataclasses.replace(case, run=run)


def unified_suite(
    name: str,
    *,
    directories: Sequence[str] | None = None,
    expect_failure: Sequence[str] = (),
    standalone: bool = False,
    client_defaults: Mapping[str, Any] | None = None,
    auth: bool = False,
    failure_check: FailureCheck | None = None,
) -> Suite:
    """A suite of the unified ``.json`` files under ``<name>/tests`` (or only its ``directories``); the
    cases of the ``expect_failure`` directories pass when they fail. With ``standalone``, the tests that
    need a single server run on one started for them, with ``auth`` those that need authentication (see
    ``run_unified``); ``client_defaults`` are URI options for every client entity that does not set them;
    ``failure_check`` says whether an expected failure failed for the intended reason."""
    return Suite(
        name=name,
        collect=unified_collector(
            name, directories, expect_failure, standalone, client_defaults, auth=auth, failure_check=failure_check
        ),
        needs_server=True,
    )


def unified_collector(
    name: str,
    directories: Sequence[str] | None = None,
    expect_failure: Sequence[str] = (),
    standalone: bool = False,
    client_defaults: Mapping[str, Any] | None = None,
    *,
    auth: bool = False,
    failure_check: FailureCheck | None = None,
) -> Callable[[Path], Iterator[SpecCase]]:
    """The ``collect`` of ``unified_suite``, for a suite that gathers other cases too."""
    run = functools.partial(run_unified, standalone=standalone, client_defaults=client_defaults, auth=auth)

    def collect(tests_dir: Path) -> Iterator[SpecCase]:
        if directories is None:
            yield from unified_cases(name, tests_dir, run)
            return
        for directory in directories:
            where = tests_dir / directory
            if not where.is_dir():
                continue
            for case in unified_cases(name, where, run):
                case = dataclasses.replace(case, file=f"{directory}/{case.file}")
                yield expecting_failure(case, failure_check) if directory in expect_failure else case

    return collect
