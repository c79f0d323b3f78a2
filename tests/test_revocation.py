"""provider.revoke (RFC 7009) against the local identity provider's revocation endpoint, the
endpoint's sources (customProperties, built-in facts, discovery) and provider faults."""

from __future__ import annotations

import logging

import pytest
import requests
from fault_server import Behaviour, FaultServer
from helpers import (
    CLIENT_ID,
    CLIENT_SECRET,
    MakeApp,
    assert_not_logged,
    discovery_block,
    idp_block,
    local_provider,
    plain_block,
    signed_in_info,
    token_strings,
)

from flask_social_oauth2 import OAuth2Info
from flask_social_oauth2.errors import ConfigurationError, UnexpectedResponseError
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.providers import BUILTIN_PROVIDERS


def userinfo_status(idp: LocalIdentityProvider, access_token: str) -> int:
    headers = {"Authorization": f"Bearer {access_token}"}
    return requests.get(idp.userinfo_url, headers=headers, timeout=10).status_code


def test_revoke_sends_the_refresh_token_to_the_discovered_endpoint(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    app = make_app({"local": discovery_block(idp)})
    info = signed_in_info(app)
    assert info.refresh_token is not None
    assert userinfo_status(idp, info.access_token) == 200
    with app.app_context():
        assert local_provider(app).revoke(info) is True
    (request,) = idp.revocation_requests
    assert request.status_code == 200
    assert request.form["token"] == info.refresh_token
    assert request.form["token_type_hint"] == "refresh_token"
    assert request.auth_method == "client_secret_post"
    # revoking the refresh token ends the grant: its access token no longer works either
    assert userinfo_status(idp, info.access_token) == 401
    with app.app_context(), pytest.raises(UnexpectedResponseError, match="invalid_grant"):
        local_provider(app).refresh(info)
    assert info.refresh_token not in repr(request)
    assert_not_logged(captured_logs, token_strings(issued))


def test_revoke_sends_the_access_token_when_there_is_no_refresh_token(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": discovery_block(idp, tokenEndpointAuthMethod="client_secret_basic")})
    idp.register_client(
        CLIENT_ID,
        CLIENT_SECRET,
        ["http://localhost/authenticate/local"],
        token_endpoint_auth_method="client_secret_basic",
    )
    info = signed_in_info(app)
    access_only = OAuth2Info(access_token=info.access_token)
    with app.app_context():
        assert local_provider(app).revoke(access_only) is True
    (request,) = idp.revocation_requests
    assert request.status_code == 200
    assert request.form["token"] == info.access_token
    assert request.form["token_type_hint"] == "access_token"
    assert request.auth_method == "client_secret_basic"
    assert userinfo_status(idp, info.access_token) == 401
    with app.app_context():  # the refresh token was not revoked with the access token alone
        renewed = local_provider(app).refresh(info)
    assert userinfo_status(idp, renewed.access_token) == 200


def test_revoke_uses_custom_properties_before_discovery(
    make_app: MakeApp, idp: LocalIdentityProvider, fault_server: FaultServer
) -> None:
    fault_server.set("/revoke", Behaviour.json({}))
    revocation_url = f"{fault_server.url}/revoke"
    app = make_app({"local": discovery_block(idp, revocationURL=revocation_url)})
    with app.app_context():
        assert local_provider(app).revoke(OAuth2Info(access_token="a", refresh_token="r")) is True
    (request,) = fault_server.requests
    assert request.path == "/revoke"
    assert request.form()["token"] == ["r"]
    assert idp.revocation_requests == []
    assert idp.discovery_requests == 0  # the configured endpoint needs no discovery


def test_no_revocation_endpoint_is_false_and_sends_nothing(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)})  # plain OAuth 2.0: no issuer, no facts
    info = signed_in_info(app)
    idp.reset_records()
    with app.app_context():
        assert local_provider(app).revoke(info) is False
    assert idp.revocation_requests == []
    assert idp.token_requests == []
    assert idp.discovery_requests == 0
    assert userinfo_status(idp, info.access_token) == 200


def test_built_in_providers_take_the_revocation_address_of_their_facts() -> None:
    assert BUILTIN_PROVIDERS["google"].default_revocation_url == (
        "https://oauth2.googleapis.com/revoke"
    )
    assert BUILTIN_PROVIDERS["github"].default_revocation_url is None
    assert BUILTIN_PROVIDERS["github"].default_api_base == "https://api.github.com/"


def test_facts_revocation_address_is_used(make_app: MakeApp, fault_server: FaultServer) -> None:
    fault_server.set("/revoke", Behaviour.json({}))
    google = BUILTIN_PROVIDERS["google"]
    block = {
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "redirectURL": "/authenticate/google",
        "accessTokenURL": f"{fault_server.url}/token",
    }
    app = make_app({"google": block})
    provider = app.extensions["social_oauth2"].providers["google"]
    assert isinstance(provider, google)
    # the built-in address, moved to the fault server by a subclass
    moved = type("MovedGoogle", (google,), {"default_revocation_url": f"{fault_server.url}/revoke"})
    with app.app_context():
        assert moved("google", provider.settings).revoke(OAuth2Info(access_token="a")) is True
    (request,) = fault_server.requests
    assert request.path == "/revoke"
    assert request.form()["token_type_hint"] == ["access_token"]


@pytest.mark.parametrize(
    ("behaviour", "status", "message"),
    [
        (Behaviour.json({"error": "server_error"}, status=500), 502, "server_error"),
        (Behaviour.json({"error": "unsupported_token_type"}, status=400), 502, "unsupported"),
        (Behaviour.html("<p>down</p>", status=503), 502, "HTTP 503"),
        (Behaviour.hang(), 504, "revocation request"),
    ],
    ids=["http-500", "unsupported-token-type", "html-503", "timeout"],
)
def test_revocation_faults_are_typed_errors(
    make_app: MakeApp,
    fault_server: FaultServer,
    behaviour: Behaviour,
    status: int,
    message: str,
) -> None:
    fault_server.set("/revoke", behaviour)
    block = plain_block(fault_server, revocationURL=f"{fault_server.url}/revoke")
    app = make_app({"plain": block}, SOCIAL_OAUTH2_TIMEOUT=1)
    with app.app_context(), pytest.raises(UnexpectedResponseError) as raised:
        local_provider(app, "plain").revoke(OAuth2Info(access_token="a", refresh_token="r-tok"))
    assert raised.value.status_code == status
    assert message in str(raised.value)
    assert "r-tok" not in str(raised.value)


def test_revocation_url_must_be_https(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    block = idp_block(idp, customProperties={"revocationURL": "http://revoke.example/revoke"})
    with pytest.raises(ConfigurationError, match=r"customProperties\.revocationURL"):
        make_app({"local": block})


def test_discovery_document_announces_revocation(idp: LocalIdentityProvider) -> None:
    document = requests.get(idp.discovery_url, timeout=10).json()
    assert document["revocation_endpoint"] == idp.revocation_url
    assert idp.endpoints()["revocation"] == idp.revocation_url
