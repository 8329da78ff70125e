"""The SOCKS5 proxy options, from a connection string or keywords to ``ClientOptions.proxy`` and the client's
proxy: validation as the SOCKS5 Support specification asks, and what mongio adds (credentials RFC 1929 can
carry, no Unix domain socket behind a proxy, python-socks needed only by a client with ``proxyHost``)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from typing import Any

import pytest

from mongio import MongoClient
from mongio.connection.socks import SocksProxy
from mongio.errors import ConfigurationError
from mongio.options import ClientOptions
from mongio.options.proxy_options import ProxyOptions

SECRET = "s0cks-s3cret"


def build(uri: str, **kwargs: Any) -> ClientOptions:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ClientOptions.from_uri(uri, **kwargs)


@pytest.mark.parametrize(
    ("uri", "kwargs", "expected"),
    [
        ("mongodb://h/?proxyHost=socks.local", {}, ProxyOptions("socks.local", 1080)),
        ("mongodb://h/?proxyHost=socks.local&proxyPort=1081", {}, ProxyOptions("socks.local", 1081)),
        (
            "mongodb://h/?proxyHost=s&proxyPort=1081&proxyUsername=u&proxyPassword=p",
            {},
            ProxyOptions("s", 1081, "u", "p"),
        ),
        ("mongodb://h", {"proxyHost": "s", "proxyPort": 9050}, ProxyOptions("s", 9050)),
        ("mongodb://h", {"PROXYHOST": "s", "proxyusername": "u", "proxyPassword": "p"}, ProxyOptions("s", 1080, "u", "p")),
        # A keyword wins over the connection string.
        ("mongodb://h/?proxyHost=a&proxyPort=1", {"proxyHost": "b"}, ProxyOptions("b", 1)),
        # An IPv6 proxy, bracketed or not.
        ("mongodb://h/?proxyHost=[::1]", {}, ProxyOptions("::1")),
        ("mongodb://h", {"proxyHost": "::1"}, ProxyOptions("::1")),
        # Empty credentials are ignored (the specification), in the string and as keywords alike.
        ("mongodb://h/?proxyHost=s&proxyUsername=&proxyPassword=", {}, ProxyOptions("s")),
        ("mongodb://h/?proxyHost=s", {"proxyUsername": "", "proxyPassword": ""}, ProxyOptions("s")),
        ("mongodb://h", {}, None),
    ],
)
def test_the_proxy_options_make_the_clients_proxy(uri: str, kwargs: dict[str, Any], expected: ProxyOptions | None) -> None:
    assert build(uri, **kwargs).proxy == expected


@pytest.mark.parametrize(
    ("uri", "kwargs", "fragment"),
    [
        ("mongodb://h/?proxyPort=1080", {}, "proxyPort=1080 is given without proxyHost"),
        ("mongodb://h", {"proxyPort": 1080}, "proxyPort=1080 is given without proxyHost"),
        ("mongodb://h", {"proxyUsername": "u", "proxyPassword": SECRET}, "proxyUsername is given without proxyHost"),
        ("mongodb://h/?proxyHost=s", {"proxyUsername": "u"}, "proxyUsername is given without proxyPassword"),
        ("mongodb://h/?proxyHost=s", {"proxyPassword": SECRET}, "proxyPassword is given without proxyUsername"),
        ("mongodb://h/?proxyHost=s", {"proxyUsername": "u", "proxyPassword": ""}, "without proxyPassword"),
        ("mongodb://h", {"proxyHost": "s", "proxyPort": 70000}, "proxyPort: 70000 (must be between 0 and 65535)"),
        ("mongodb://h/?proxyHost=a&proxyHost=b", {}, "proxyHost is given 2 times"),
        ("mongodb://%2Ftmp%2Fm.sock/?proxyHost=s", {}, "proxyHost cannot be used with the Unix domain socket"),
        ("mongodb://h/?proxyHost=s", {"proxyUsername": "ü", "proxyPassword": SECRET}, "proxyUsername must be at most"),
        ("mongodb://h/?proxyHost=s", {"proxyUsername": "u", "proxyPassword": SECRET + "é"}, "proxyPassword must be"),
        ("mongodb://h/?proxyHost=s", {"proxyUsername": "u", "proxyPassword": "x" * 256}, "at most 255 ASCII"),
    ],
)
def test_invalid_proxy_options_are_refused_naming_the_problem(uri: str, kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build(uri, **kwargs)
    assert fragment in str(caught.value)
    assert SECRET not in str(caught.value)


def test_the_longest_credentials_rfc_1929_carries_are_accepted() -> None:
    options = build("mongodb://h/?proxyHost=s", proxyUsername="u" * 255, proxyPassword="p" * 255)
    assert options.proxy == ProxyOptions("s", 1080, "u" * 255, "p" * 255)


def test_the_proxy_password_is_in_no_repr() -> None:
    options = build(f"mongodb://h/?proxyHost=s&proxyUsername=u&proxyPassword={SECRET}")
    client = MongoClient("mongodb://h", proxyHost="s", proxyUsername="u", proxyPassword=SECRET, connect=False)
    assert options.proxy is not None and options.proxy.password == SECRET
    proxy = SocksProxy(options.proxy)
    shown = [repr(options), repr(options.proxy), repr(options.options), repr(client), repr(proxy)]
    assert all(SECRET not in text for text in shown), shown
    assert repr(proxy) == "SocksProxy(s:1080, authenticates=True)"


def test_a_client_without_python_socks_refuses_a_proxy_saying_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "python_socks", None)  # what an uninstalled package looks like to import
    with pytest.raises(ConfigurationError, match=r"proxyHost='s' needs python-socks: install mongio\[socks\]"):
        MongoClient("mongodb://h/?proxyHost=s", connect=False)
    MongoClient("mongodb://h", connect=False)  # a client without a proxy never needs it


def test_python_socks_is_imported_only_by_a_client_with_a_proxy() -> None:
    probe = (
        "import sys, mongio\n"
        "mongio.MongoClient('mongodb://127.0.0.1:1/', connect=False)\n"
        "before = 'python_socks' in sys.modules\n"
        "mongio.MongoClient('mongodb://127.0.0.1:1/?proxyHost=127.0.0.1', connect=False)\n"
        "print(before, 'python_socks' in sys.modules)\n"
    )
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert completed.stdout.split() == ["False", "True"]
