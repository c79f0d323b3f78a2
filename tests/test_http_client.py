"""The pooled provider client's request path, against a real local HTTP server.

The client prepares a request itself and hands it to the session's adapter (without
``Session.request``, see ``ProviderHTTPClient._send``); these tests pin what that path must keep:
the headers sent, keep-alive, the mapping of failures, a pool closed under it, and the proxy
path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fault_server import Behaviour, FaultServer, refused_url

from flask_social_oauth2.errors import UnexpectedResponseError
from flask_social_oauth2.http_client import ProviderHTTPClient, ProviderResponse


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
