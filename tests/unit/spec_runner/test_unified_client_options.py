"""Client entity options the unified runner resolves before making a client."""

from __future__ import annotations

import pytest
from spec_runner.unified.backend import missing_environment_value, read_preference
from spec_runner.unified.errors import UnifiedTestError
from spec_runner.unified.matcher import resolve_placeholders


def test_uri_option_placeholders_without_an_environment_value_name_their_path() -> None:
    options = {"authMechanism": "MONGODB-OIDC", "authMechanismProperties": {"ENVIRONMENT": {"$$placeholder": 1}}}
    with pytest.raises(UnifiedTestError, match=r"uriOptions\.authMechanismProperties\.ENVIRONMENT: \$\$placeholder"):
        resolve_placeholders(options, missing_environment_value, "uriOptions")
    # Options without placeholders are passed on unchanged.
    plain = {"retryWrites": False, "readPreferenceTags": ["dc:ny"]}
    assert resolve_placeholders(plain, missing_environment_value, "uriOptions") == plain


def test_read_preference_refuses_fields_it_cannot_honour() -> None:
    assert read_preference({"mode": "secondaryPreferred", "maxStalenessSeconds": 90}).max_staleness == 90
    with pytest.raises(UnifiedTestError, match=r"unsupported field\(s\) \['hedge'\]"):
        read_preference({"mode": "nearest", "hedge": {"enabled": True}})
