"""The cluster harness's MONGODB-OIDC identity provider: the conversations its members answer, and the
unified runner's test-environment value for an OIDC client's ``authMechanismProperties``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from spec_runner.cluster.oidc import OidcProvider
from spec_runner.unified.backend import environment_value
from spec_runner.unified.errors import UnifiedTestError

from mongio.bson import decode, encode
from mongio.options import ClientOptions


@pytest.fixture
def provider() -> Iterator[OidcProvider]:
    made = OidcProvider()
    yield made
    made.close()


def sasl_start(payload: dict[str, object]) -> dict[str, object]:
    return {"saslStart": 1, "mechanism": "MONGODB-OIDC", "payload": encode(payload), "$db": "$external"}


def test_the_token_file_authenticates_and_a_forged_token_does_not(provider: OidcProvider) -> None:
    token = Path(provider.token_file).read_text()
    assert provider.start(sasl_start({"jwt": token})) == (
        {"conversationId": 1, "done": True, "payload": b"", "ok": 1.0}, None,
    )  # fmt: skip
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    refused, _ = provider.start(sasl_start({"jwt": forged}))
    assert refused["code"] == 18


def test_an_expired_token_is_refused(provider: OidcProvider) -> None:
    refused, _ = provider.start(sasl_start({"jwt": provider.issue("old", -1.0)}))
    assert refused["code"] == 18


def test_the_principal_step_names_the_provider_then_the_token_is_checked(provider: OidcProvider) -> None:
    reply, state = provider.start(sasl_start({"n": "user"}))
    assert reply["ok"] == 1.0 and reply["done"] is False
    assert decode(reply["payload"])["issuer"] == "https://oidc.harness.invalid"
    token = Path(provider.token_file).read_text()
    done = provider.finish(state, {"saslContinue": 1, "payload": encode({"jwt": token})})
    assert done["ok"] == 1.0 and done["done"] is True
    assert provider.finish(state, {"saslContinue": 1, "payload": encode({"jwt": "x.y.z"})})["code"] == 18


def test_a_payload_that_is_not_bson_is_refused(provider: OidcProvider) -> None:
    refused, _ = provider.start({**sasl_start({}), "payload": b"not bson"})
    assert refused["code"] == 18
    assert provider.finish(None, {"saslContinue": 1, "payload": "text"})["code"] == 18


def test_close_removes_the_token_file() -> None:
    provider = OidcProvider()
    path = Path(provider.token_file)
    provider.close()
    assert not path.exists() and not path.parent.exists()


def test_placeholder_properties_come_from_an_oidc_uri() -> None:
    options = ClientOptions.from_uri(
        "mongodb://127.0.0.1/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test"
    )
    provide = environment_value(options.credential)
    assert provide("uriOptions.authMechanismProperties") == {"ENVIRONMENT": "test"}
    with pytest.raises(UnifiedTestError, match="needs a value from the test environment"):
        provide("uriOptions.password")
    with pytest.raises(UnifiedTestError):
        environment_value(None)("uriOptions.authMechanismProperties")
