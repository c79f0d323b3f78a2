"""The pooled provider client's request path, against a real local HTTP server.

The client sends through the urllib3 pools of its session's adapter (or the adapter's manager
for a proxy); these tests pin what that path must keep of requests' own: the headers sent,
keep-alive, the mapping of failures, a pool closed under it, the proxy path, TLS verification
(certifi, or the CA bundle the environment names, read once) in the pools ``social.api()``
shares, no cookies, no ``~/.netrc``, no redirect followed, and answers and headers that cannot be
read or sent.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from fault_server import Behaviour, FaultServer, refused_url

from flask_social_oauth2.errors import ProfileRetrievalError, UnexpectedResponseError
from flask_social_oauth2.oauth.http_client import ProviderHTTPClient
from flask_social_oauth2.oauth.provider_response import ProviderResponse


def call(client: ProviderHTTPClient, url: str, **kwargs: object) -> ProviderResponse:
    options: dict[str, object] = {"timeout": 2.0, "max_bytes": 64 * 1024, **kwargs}
    return client.request(
        "POST" if "data" in options else "GET",
        url,
        provider="p",
        step="token request",
        error=UnexpectedResponseError,
        **options,  # type: ignore[arg-type]
    )


def test_sends_the_request_as_prepared_and_asks_for_an_unencoded_answer(
    fault_server: FaultServer,
) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "at"}))
    client = ProviderHTTPClient()
    answer = call(
        client,
        f"{fault_server.url}/token",
        data="grant_type=authorization_code&code=c",
        headers={"Accept": "application/json"},
    )
    assert json.loads(answer.body) == {"access_token": "at"}
    (seen,) = fault_server.requests
    assert seen.method == "POST"
    assert seen.target == "/token"
    assert seen.body == b"grant_type=authorization_code&code=c"
    assert seen.headers["Content-Length"] == str(len(seen.body))
    assert seen.headers["Accept"] == "application/json"
    assert seen.headers["User-Agent"] == "flask-social-oauth2"
    # The body is read raw under the size cap: a gzip answer would reach the JSON parser.
    assert seen.headers["Accept-Encoding"] == "identity"
    assert "Cookie" not in seen.headers
    assert "Authorization" not in seen.headers


def test_query_parameters_are_added_to_the_target(fault_server: FaultServer) -> None:
    fault_server.set("/me", Behaviour.json({"id": 1}))
    call(ProviderHTTPClient(), f"{fault_server.url}/me?fields=id", params={"x": "a b"})
    (seen,) = fault_server.requests
    assert seen.target == "/me?fields=id&x=a+b"


def test_connections_are_kept_alive_and_reused(fault_server: FaultServer) -> None:
    fault_server.set("/me", Behaviour.json({"id": 1}))
    client = ProviderHTTPClient()
    for _ in range(3):
        call(client, f"{fault_server.url}/me")
    assert [r.connection for r in fault_server.requests] == [1, 1, 1]


def test_a_pool_the_pool_manager_closed_is_replaced(fault_server: FaultServer) -> None:
    fault_server.set("/me", Behaviour.json({"id": 1}))
    client = ProviderHTTPClient()
    call(client, f"{fault_server.url}/me")
    adapter: Any = client._session.get_adapter(fault_server.url)
    adapter.poolmanager.clear()  # closes and drops every pool, as it does past pool_size hosts
    assert json.loads(call(client, f"{fault_server.url}/me").body) == {"id": 1}


@pytest.mark.parametrize(
    ("behaviour", "status", "message"),
    [
        (Behaviour.hang(), 504, "timed out"),
        (Behaviour.close_without_response(), 502, "failed: ConnectionError"),
        (Behaviour.reset_mid_body(), 502, "failed mid-answer"),
    ],
)
def test_failures_map_to_deliberate_statuses(
    fault_server: FaultServer, behaviour: Behaviour, status: int, message: str
) -> None:
    fault_server.set("/token", behaviour)
    with pytest.raises(UnexpectedResponseError) as caught:
        call(ProviderHTTPClient(), f"{fault_server.url}/token", timeout=0.5)
    assert caught.value.status_code == status
    assert message in str(caught.value)


def test_refused_connection_is_a_502() -> None:
    with pytest.raises(UnexpectedResponseError) as caught:
        call(ProviderHTTPClient(), refused_url("/token"))
    assert caught.value.status_code == 502
    assert "failed: ConnectionError" in str(caught.value)


def test_an_untrusted_certificate_is_a_tls_error() -> None:
    with FaultServer(tls=True) as server:
        server.set("/token", Behaviour.json({"access_token": "at"}))
        with pytest.raises(UnexpectedResponseError) as caught:
            call(ProviderHTTPClient(), f"{server.url}/token")
    assert caught.value.status_code == 502
    assert "TLS error" in str(caught.value)


def test_with_a_proxy_the_request_goes_through_it(
    fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("http_proxy", fault_server.url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    client = ProviderHTTPClient()  # proxies are read once, here
    call(client, "http://provider.invalid/me")
    (seen,) = fault_server.requests
    assert seen.target == "http://provider.invalid/me"


def test_a_ca_bundle_the_environment_names_is_trusted_and_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FaultServer(tls=True) as server:
        server.set("/token", Behaviour.json({"access_token": "at"}))
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", server.cert_file)
        trusting = ProviderHTTPClient()
        monkeypatch.delenv("REQUESTS_CA_BUNDLE")
        assert json.loads(call(trusting, f"{server.url}/token").body) == {"access_token": "at"}
        monkeypatch.setenv("CURL_CA_BUNDLE", server.cert_file)
        assert call(ProviderHTTPClient(), f"{server.url}/token").status == 200
        monkeypatch.delenv("CURL_CA_BUNDLE")
        with pytest.raises(UnexpectedResponseError) as caught:
            call(ProviderHTTPClient(), f"{server.url}/token")  # certifi's roots only
    assert "TLS error" in str(caught.value)


@pytest.mark.parametrize("tls", [False, True])
def test_provider_calls_and_session_requests_share_one_pool(
    monkeypatch: pytest.MonkeyPatch, tls: bool
) -> None:
    """``social.api()`` sends with ``Session.request`` through the same adapter: its requests
    and the provider calls use the same pool (and TLS settings) for a host."""
    with FaultServer(tls=tls) as server:
        server.set("/me", Behaviour.json({"id": 1}))
        if tls:
            monkeypatch.setenv("REQUESTS_CA_BUNDLE", server.cert_file)
        client = ProviderHTTPClient()
        call(client, f"{server.url}/me")
        assert client._session.get(f"{server.url}/me", timeout=2).json() == {"id": 1}
        call(client, f"{server.url}/me")
        adapter: Any = client._session.get_adapter(server.url)
        assert len(adapter.poolmanager.pools) == 1
        assert [r.connection for r in server.requests] == [1, 1, 1]


def test_a_mapping_body_is_sent_as_a_form_and_a_bodyless_post_says_so(
    fault_server: FaultServer,
) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "at"}))
    client = ProviderHTTPClient()
    call(client, f"{fault_server.url}/token", data={"a": "1 2", "b": "\u00e9"})
    call(client, f"{fault_server.url}/token", data="")
    form, empty = fault_server.requests
    assert form.body == b"a=1+2&b=%C3%A9"
    assert form.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert empty.body == b""
    assert empty.headers["Content-Length"] == "0"
    assert "Content-Type" not in empty.headers


def test_a_header_named_in_other_case_replaces_the_default(fault_server: FaultServer) -> None:
    fault_server.set("/me", Behaviour.json({"id": 1}))
    call(ProviderHTTPClient(), f"{fault_server.url}/me", headers={"user-agent": "mine"})
    (seen,) = fault_server.requests
    assert seen.headers["User-Agent"] == "mine"
    assert seen.headers["Accept"] == "*/*"


def raw_answer(status: int, fields: list[tuple[str, str]], body: bytes = b"") -> Behaviour:
    """An answer sent exactly as given: these header fields (no Content-Length added), then
    ``body``, then the connection is closed."""

    def handler(exchange: Any) -> bool:
        exchange.conn.send(exchange.head(status, fields, close=True) + body)
        return False

    return Behaviour(f"raw({status})", handler)


def endless_chunks(exchange: Any, status: int, fields: list[tuple[str, str]]) -> bool:
    exchange.conn.send(exchange.head(status, [*fields, ("Transfer-Encoding", "chunked")]))
    frame = b"4000\r\n" + b"x" * 0x4000 + b"\r\n"
    while True:
        exchange.conn.send(frame)


def test_a_cookie_a_provider_sets_is_never_sent(fault_server: FaultServer) -> None:
    fault_server.set(
        "/token", Behaviour.json({"access_token": "at"}, headers={"Set-Cookie": "sid=user-a"})
    )
    client = ProviderHTTPClient()
    call(client, f"{fault_server.url}/token")
    call(client, f"{fault_server.url}/token")
    assert [r.headers.get("Cookie") for r in fault_server.requests] == [None, None]


def test_netrc_credentials_are_never_attached(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login someone password netrc-password\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(netrc))
    fault_server.set("/me", Behaviour.json({"id": 1}))
    call(ProviderHTTPClient(), f"{fault_server.url}/me")
    (seen,) = fault_server.requests
    assert "Authorization" not in seen.headers


def test_a_redirect_is_not_followed_nor_its_body_read_past_the_cap(
    fault_server: FaultServer,
) -> None:
    """requests reads a redirect's whole body before following it, and even when it does not
    follow it: an endless body after a Location header must meet the same cap as any."""
    fault_server.set(
        "/token",
        Behaviour(
            "endless redirect",
            lambda exchange: endless_chunks(exchange, 302, [("Location", "/elsewhere")]),
        ),
    )
    tracemalloc.start()
    try:
        with pytest.raises(UnexpectedResponseError) as caught:
            call(ProviderHTTPClient(), f"{fault_server.url}/token", max_bytes=1024 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.status_code == 502
    assert "larger than" in str(caught.value)
    assert peak < 8 * 1024 * 1024
    assert fault_server.count("/elsewhere") == 0


def test_a_redirect_is_answered_as_it_came(fault_server: FaultServer) -> None:
    fault_server.set("/me", Behaviour.respond(302, b"", {"Location": "/elsewhere"}))
    answer = call(ProviderHTTPClient(), f"{fault_server.url}/me")
    assert answer.status == 302
    assert fault_server.count("/elsewhere") == 0


@pytest.mark.parametrize("length", ["\xb2", "2\xb2", "+22", "-1", "22, 22", "0x16", "", "9" * 5000])
def test_a_content_length_of_anything_but_ascii_digits_is_a_502(
    fault_server: FaultServer, length: str
) -> None:
    body = b'{"access_token": "at"}'
    fields = [("Content-Type", "application/json"), ("Content-Length", length)]
    fault_server.set("/token", raw_answer(200, fields, body))
    with pytest.raises(UnexpectedResponseError) as caught:
        call(ProviderHTTPClient(), f"{fault_server.url}/token")
    assert caught.value.status_code == 502
    expected = (
        "larger than" if length.isascii() and length.isdigit() else "malformed Content-Length"
    )
    assert expected in str(caught.value)


def test_a_content_length_over_the_cap_is_refused_before_the_body(
    fault_server: FaultServer,
) -> None:
    fields = [("Content-Type", "application/json"), ("Content-Length", str(2 * 1024 * 1024))]
    fault_server.set("/token", raw_answer(200, fields, b"{}"))
    with pytest.raises(UnexpectedResponseError) as caught:
        call(ProviderHTTPClient(), f"{fault_server.url}/token", max_bytes=1024 * 1024)
    assert "larger than 1048576 bytes" in str(caught.value)


@pytest.mark.parametrize("value", ["Bearer at-\u20ac", "Bearer at\r\nX-Evil: 1", "Bearer \x00"])
def test_a_header_that_cannot_be_sent_is_a_502_naming_it_and_nothing_is_sent(
    fault_server: FaultServer, value: str
) -> None:
    fault_server.set("/me", Behaviour.json({"id": 1}))
    with pytest.raises(ProfileRetrievalError) as caught:
        ProviderHTTPClient().request(
            "GET",
            f"{fault_server.url}/me",
            provider="p",
            step="profile request",
            error=ProfileRetrievalError,
            timeout=2.0,
            max_bytes=1024,
            headers={"Authorization": value},
        )
    assert caught.value.status_code == 502
    assert "the Authorization header cannot be sent" in str(caught.value)
    assert "at-" not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None  # no UnicodeEncodeError holding the value
    assert fault_server.count() == 0


def test_a_latin_1_header_is_sent(fault_server: FaultServer) -> None:
    fault_server.set("/me", Behaviour.json({"id": 1}))
    call(ProviderHTTPClient(), f"{fault_server.url}/me", headers={"X-Name": "caf\xe9"})
    (seen,) = fault_server.requests
    assert seen.headers["X-Name"] == "caf\xe9"
