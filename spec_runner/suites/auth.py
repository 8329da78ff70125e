"""The authentication specification's connection string tests (``tests/legacy``) and the MONGODB-AWS
scenarios of ``tests/mongodb-aws.md``.

A URI is valid when a client's options can be built from it; the credential built is compared with the
expected one. (The unified-format files under ``tests/unified`` need the unified runner and are not
collected here.)

Each scenario of ``mongodb-aws.md`` (a ``##`` section, and the numbered custom-provider tests) is one case:
authenticate with MONGODB-AWS to the deployment of ``MONGODB_URI`` and run a ``find``, with the credentials
the AWS environment of that scenario provides (an IAM user's keys, an EC2 instance role, an ECS task role,
an EKS web identity, ...). They need a real AWS deployment, so the skip list names them; the same scenarios
run against loopback fakes in ``tests/unit/connection/test_auth_aws.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from spec_runner.model import RunContext, SpecCase, Suite, relative_file, unique_names

NAME = "auth"


def _run(case: Mapping[str, Any]) -> None:
    from mongio.errors import ConfigurationError
    from mongio.options import ClientOptions

    uri = case["uri"]
    try:
        options = ClientOptions.from_uri(uri)
    except ConfigurationError as exc:
        if case["valid"]:
            raise AssertionError(f"{uri!r} should be valid, but raised {type(exc).__name__}: {exc}") from exc
        return
    if not case["valid"]:
        raise AssertionError(f"{uri!r} should be invalid, but gave credential {options.credential!r}")
    expected = case.get("credential")
    credential = options.credential
    if expected is None:
        if "credential" in case and credential is not None:
            raise AssertionError(f"{uri!r} should configure no credential, got {credential!r}")
        return
    if credential is None:
        raise AssertionError(f"{uri!r} should configure a credential, got none")
    for key, got in (
        ("username", credential.username),
        ("password", credential.password),
        ("source", credential.source),
    ):
        if key in expected and got != expected[key]:
            raise AssertionError(f"{uri!r}: credential {key} is {got!r}, expected {expected[key]!r}")
    if "mechanism" in expected:
        want = expected["mechanism"] or "DEFAULT"  # null: no mechanism given, negotiated at the handshake
        if credential.mechanism != want:
            raise AssertionError(f"{uri!r}: mechanism is {credential.mechanism!r}, expected {want!r}")
    properties = expected.get("mechanism_properties")
    if "mechanism_properties" in expected and properties is None and credential.mechanism_properties:
        raise AssertionError(
            f"{uri!r}: expected no mechanism properties, got {dict(credential.mechanism_properties)!r}"
        )
    for key, value in (properties or {}).items():
        got = credential.mechanism_properties.get(key)
        if got != value:
            raise AssertionError(f"{uri!r}: mechanism property {key} is {got!r}, expected {value!r}")


def _bind(case: Mapping[str, Any]) -> Callable[[RunContext], None]:
    return lambda _context: _run(case)


_AWS_PROSE = "mongodb-aws.md"


def _aws_scenarios(text: str) -> list[str]:
    """The scenario headings of ``mongodb-aws.md``: its ``##`` sections and, in place of the custom-provider
    section, its numbered tests (or their cases, when a test has some); removed cases are left out."""
    headings = []
    for line in text.splitlines():
        level = len(line) - len(line.lstrip("#"))
        heading = line[level:].strip()
        if level >= 2 and heading and "Removed" not in heading:
            headings.append((level, heading))
    names = []
    for index, (level, heading) in enumerate(headings):
        deeper_follows = index + 1 < len(headings) and headings[index + 1][0] > level
        if not deeper_follows:
            names.append(heading)
    return names


async def _run_aws_scenario(context: RunContext) -> None:
    from mongio import MongoClient

    if context.uri is None:
        raise AssertionError(
            "MONGODB-AWS scenarios need MONGODB_URI: a deployment configured for MONGODB-AWS"
        )
    separator = "&" if "?" in context.uri else "/?"
    async with MongoClient(f"{context.uri}{separator}authMechanism=MONGODB-AWS") as client:
        await client.aws.test.find_one({})


def _collect_aws(tests_dir: Path) -> Iterator[SpecCase]:
    path = tests_dir / _AWS_PROSE
    file = relative_file(tests_dir, path)
    for name in unique_names(_aws_scenarios(path.read_text(encoding="utf-8"))):
        yield SpecCase(suite=NAME, file=file, name=name, run=_run_aws_scenario, needs_server=True)


def collect(tests_dir: Path) -> Iterator[SpecCase]:
    yield from _collect_aws(tests_dir)
    for path in sorted((tests_dir / "legacy").glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        tests = spec.get("tests", [])
        file = relative_file(tests_dir, path)
        for name, case in zip(unique_names([t["description"] for t in tests]), tests):
            yield SpecCase(suite=NAME, file=file, name=name, run=_bind(case))


SUITE = Suite(name=NAME, collect=collect)
