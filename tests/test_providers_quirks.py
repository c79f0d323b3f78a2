"""The quirks of the second group of issue 14's providers, and LINE's HS256 ID tokens.

Each test runs a whole sign-in through the app's route against a loopback server that serves
the provider's recorded answers (see :mod:`provider_sign_in`).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fault_server import Behaviour, FaultServer
from provider_cases import SIGN_INS, one_request
from provider_sign_in import (
    ACCESS_TOKEN,
    CLIENT_ID,
    CLIENT_SECRET,
    Outcome,
    fixture,
    provider_block,
    serve_and_sign_in,
    sign_in,
    trimmed,
)

from flask_social_oauth2 import OAuth2Settings
from flask_social_oauth2.errors import IdTokenError, ProfileRetrievalError
from flask_social_oauth2.providers import BUILTIN_PROVIDERS, PROVIDER_FACTS


@pytest.fixture
def server() -> Iterator[FaultServer]:
    """A real HTTP server on loopback that records every request."""
    with FaultServer() as running:
        yield running


# -- quirks of the second group ------------------------------------------------------------------


def test_foursquare_token_and_version_date_in_the_query(server: FaultServer) -> None:
    serve_and_sign_in(server, "foursquare", SIGN_INS["foursquare"])
    request = one_request(server, "/v2/users/self")
    assert request.query == {"oauth_token": [ACCESS_TOKEN], "v": ["20231010"]}
    assert "Authorization" not in request.headers


def test_foursquare_api_version_is_checked() -> None:
    settings = OAuth2Settings.from_config(
        {
            "authorizationURL": "https://foursquare.com/oauth2/authenticate",
            "accessTokenURL": "https://foursquare.com/oauth2/access_token",
            "redirectURL": "/authenticate/foursquare",
            "clientID": "c",
            "clientSecret": "s",
            "customProperties": {"apiVersion": "2014-02-06"},
        },
        provider="foursquare",
    )
    problems = BUILTIN_PROVIDERS["foursquare"].settings_problems(settings)
    assert [problem.key for problem in problems] == ["customProperties.apiVersion"]


def test_foursquare_documented_error_answer_fails_the_sign_in(server: FaultServer) -> None:
    case = SIGN_INS["foursquare"]
    server.set("/token", Behaviour.json({"access_token": ACCESS_TOKEN}))
    server.set("/v2/users/self", Behaviour.json(fixture("foursquare.error"), status=400))
    outcome = sign_in(server, "foursquare", provider_block(server, "foursquare", case))
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert ACCESS_TOKEN not in str(outcome.error)


@pytest.mark.parametrize("wrapped", [True, False])
def test_instagram_token_answer_wrapped_or_flat(server: FaultServer, wrapped: bool) -> None:
    entry = fixture("instagram.token")["data"][0]
    token = {"data": [entry]} if wrapped else entry
    outcome = serve_and_sign_in(server, "instagram", SIGN_INS["instagram"], token=token)
    assert outcome.info is not None, outcome.error
    assert outcome.info.access_token == "EAACEdEose0..."
    assert outcome.info.params["user_id"] == "1020..."
    request = one_request(server, "/me")
    assert request.query["fields"] == ["user_id,username,name,profile_picture_url"]


@pytest.mark.parametrize(
    ("valid", "verified", "expected"),
    [(True, True, True), (False, True, False), (True, False, False), (None, None, None)],
)
def test_kakao_email_verified_needs_a_valid_address(
    server: FaultServer, valid: bool | None, verified: bool | None, expected: bool | None
) -> None:
    answer = fixture("kakao")
    for key, value in (("is_email_valid", valid), ("is_email_verified", verified)):
        if value is None:
            del answer["kakao_account"][key]
        else:
            answer["kakao_account"][key] = value
    outcome = serve_and_sign_in(server, "kakao", SIGN_INS["kakao"], profile=answer)
    assert outcome.profile is not None
    assert (outcome.profile.email, outcome.profile.email_verified) == (
        "sample@sample.com",
        expected,
    )


def test_naver_wrapped_answer_and_string_expiry(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "naver", SIGN_INS["naver"])
    assert outcome.info is not None
    assert outcome.profile is not None
    assert outcome.info.expires_in == 3600
    assert outcome.profile.raw["resultcode"] == "00"


def test_naver_nickname_when_there_is_no_name(server: FaultServer) -> None:
    answer = trimmed(fixture("naver"), ("response.name",))
    outcome = serve_and_sign_in(server, "naver", SIGN_INS["naver"], profile=answer)
    assert outcome.profile is not None
    assert outcome.profile.full_name == "OpenAPI"


def test_yandex_profile_request(server: FaultServer) -> None:
    serve_and_sign_in(server, "yandex", SIGN_INS["yandex"])
    request = one_request(server, "/info")
    assert request.headers["Authorization"] == f"OAuth {ACCESS_TOKEN}"
    assert request.query == {"format": ["json"]}


@pytest.mark.parametrize(
    ("changes", "avatar"),
    [
        ({"is_avatar_empty": True}, None),
        ({"default_avatar_id": "../../evil"}, None),
        (
            {"default_avatar_id": "1/a b"},
            "https://avatars.yandex.net/get-yapic/1/a%20b/islands-200",
        ),
    ],
)
def test_yandex_avatar(server: FaultServer, changes: dict[str, Any], avatar: str | None) -> None:
    answer = {**fixture("yandex"), **changes}
    outcome = serve_and_sign_in(server, "yandex", SIGN_INS["yandex"], profile=answer)
    assert outcome.profile is not None
    assert outcome.profile.avatar_url == avatar


def test_cognito_basic_auth_and_string_booleans(server: FaultServer) -> None:
    answer = {**fixture("cognito"), "email_verified": "false"}
    outcome = serve_and_sign_in(server, "cognito", SIGN_INS["cognito"], profile=answer)
    assert outcome.profile is not None
    assert outcome.profile.email_verified is False
    assert one_request(server).headers["Authorization"].startswith("Basic ")


def test_cognito_userinfo_on_the_pool_domain_and_issuer_setting() -> None:
    settings = OAuth2Settings.from_config(
        {
            "authorizationURL": "https://acme.auth.eu-west-1.amazoncognito.com/oauth2/authorize",
            "accessTokenURL": "https://acme.auth.eu-west-1.amazoncognito.com/oauth2/token",
            "redirectURL": "/authenticate/cognito",
            "clientID": "c",
            "clientSecret": "s",
            "scope": "openid email",
            "customProperties": {
                "issuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbC"
            },
        },
        provider="cognito",
    )
    cls = BUILTIN_PROVIDERS["cognito"]
    assert cls.default_profile_url_for(settings) == (
        "https://acme.auth.eu-west-1.amazoncognito.com/oauth2/userInfo"
    )
    assert cls.issuer_for(settings) == "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbC"


def test_notion_user_from_the_token_answer_without_a_profile_request(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "notion", SIGN_INS["notion"])
    assert outcome.profile is not None
    assert outcome.info is not None
    assert [request.path for request in server.requests] == ["/token"]
    assert outcome.profile.raw == fixture("notion.token")["owner"]["user"]
    assert outcome.info.params["workspace_name"] == "Ada's Notion Workspace"
    request = one_request(server)
    expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
    assert request.headers["Authorization"] == f"Basic {expected}"
    assert request.headers["Content-Type"] == "application/json"
    assert "client_secret" not in json.loads(request.body)


def test_notion_authorization_request_names_the_user_as_owner(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "notion", SIGN_INS["notion"])
    assert outcome.authorization_query["owner"] == "user"


def test_notion_workspace_owner_is_a_profile_error(server: FaultServer) -> None:
    token = {**fixture("notion.token"), "owner": {"type": "workspace", "workspace": True}}
    outcome = serve_and_sign_in(server, "notion", SIGN_INS["notion"], token=token)
    assert isinstance(outcome.error, ProfileRetrievalError)


def test_hubspot_token_in_the_path_is_quoted(server: FaultServer) -> None:
    token = "CK/Dp+u?n#P=="
    quoted = "CK%2FDp%2Bu%3Fn%23P%3D%3D"
    path = f"/oauth/v1/access-tokens/{quoted}"
    server.set(path, Behaviour.json(fixture("hubspot")))
    server.set("/token", Behaviour.json({"access_token": token, "token_type": "bearer"}))
    outcome = sign_in(server, "hubspot", provider_block(server, "hubspot", SIGN_INS["hubspot"]))
    assert outcome.profile is not None, outcome.error
    assert server.count(path) == 1
    assert outcome.profile.raw["hub_id"] == 62515


def test_tiktok_sends_client_key(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "tiktok", SIGN_INS["tiktok"])
    assert outcome.authorization_query["client_key"] == CLIENT_ID
    body = one_request(server).form()
    assert body["client_key"] == [CLIENT_ID]
    assert body["client_secret"] == [CLIENT_SECRET]
    assert one_request(server, "/v2/user/info/").query["fields"] == [
        "open_id,union_id,avatar_url,display_name"
    ]


@pytest.mark.parametrize("code", ["access_token_invalid", None])
def test_tiktok_error_code_other_than_ok_fails(server: FaultServer, code: str | None) -> None:
    answer = fixture("tiktok")
    answer["error"] = {"code": code, "message": "The access token is invalid", "log_id": "x"}
    outcome = serve_and_sign_in(server, "tiktok", SIGN_INS["tiktok"], profile=answer)
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert repr(code or "<missing>") in str(outcome.error)


def test_paypal_basic_auth_and_openid_schema(server: FaultServer) -> None:
    serve_and_sign_in(server, "paypal", SIGN_INS["paypal"])
    assert one_request(server).headers["Authorization"].startswith("Basic ")
    assert "client_secret" not in one_request(server).form()
    profile_request = one_request(server, "/v1/identity/openidconnect/userinfo")
    assert profile_request.query == {"schema": ["openid"]}


def test_paypal_documented_error_answer_fails_the_sign_in(server: FaultServer) -> None:
    case = SIGN_INS["paypal"]
    server.set("/token", Behaviour.json({"access_token": ACCESS_TOKEN}))
    server.set(case.api_path or "", Behaviour.json(fixture("paypal.error"), status=401))
    outcome = sign_in(server, "paypal", provider_block(server, "paypal", case))
    assert isinstance(outcome.error, ProfileRetrievalError)


def test_osu_numeric_id_is_a_string(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "osu", SIGN_INS["osu"])
    assert outcome.profile is not None
    assert outcome.profile.provider_key == "2"
    assert outcome.profile.raw["id"] == 2


# -- LINE: ID tokens signed with the channel secret ----------------------------------------------


def line_id_token(
    server: FaultServer, nonce: str, *, secret: str = CLIENT_SECRET, **changes: Any
) -> str:
    from joserfc import jwt
    from joserfc.jwk import OctKey

    now = int(time.time())
    claims = {
        **fixture("line.id_token"),
        "iss": server.url,
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 600,
        "nonce": nonce,
        **changes,
    }
    algorithm = str(claims.pop("alg", "HS256"))
    key = OctKey.import_key(secret.encode())
    return jwt.encode({"alg": algorithm}, claims, key, algorithms=[algorithm])


def line_sign_in(server: FaultServer, make_token: Callable[[str], str]) -> Outcome:
    """A LINE sign-in with ``openid``: the ID token is made for the flow's nonce."""
    server.set(
        "/.well-known/openid-configuration",
        Behaviour.json(
            {
                "issuer": server.url,
                "authorization_endpoint": f"{server.url}/authorize",
                "token_endpoint": f"{server.url}/token",
                "jwks_uri": f"{server.url}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["pairwise"],
                "id_token_signing_alg_values_supported": ["HS256", "ES256"],
            }
        ),
    )
    server.set("/jwks", Behaviour.json({"keys": []}))
    server.set("/v2/profile", Behaviour.json(fixture("line")))
    block = provider_block(server, "line", SIGN_INS["line"])
    block.update(scope="profile openid email", customProperties={"issuer": server.url})

    def answer(request: Any) -> Behaviour:
        nonce = started["nonce"]
        token = {**fixture("line.token"), "id_token": make_token(nonce)}
        return Behaviour.json(token)

    started: dict[str, str] = {}
    server.set("/token", Behaviour.dynamic(answer))
    return sign_in(server, "line", block, on_start=started.update)


def test_line_hs256_id_token_gives_the_email(server: FaultServer) -> None:
    outcome = line_sign_in(server, lambda nonce: line_id_token(server, nonce))
    assert outcome.profile is not None, outcome.error
    assert outcome.info is not None
    assert outcome.info.id_token_claims is not None
    assert outcome.info.id_token_claims["amr"] == ["pwd"]
    assert (outcome.profile.email, outcome.profile.email_verified) == (
        "taro.line@example.com",
        None,
    )
    assert outcome.profile.provider_key == "U4af4980629..."


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"secret": "another-channel-secret-value-0123"}, "signature is not valid"),
        ({"nonce": "not-the-flow-nonce"}, "nonce"),
        ({"aud": "another-channel"}, "aud"),
        ({"iss": "https://access.line.me.evil.example"}, "iss"),
        ({"exp": 1000}, "expired"),
        ({"alg": "HS512", "secret": "k" * 64}, "not allowed"),
    ],
)
def test_line_id_token_checks(server: FaultServer, changes: dict[str, Any], message: str) -> None:
    def make(nonce: str) -> str:
        values = dict(changes)
        secret = str(values.pop("secret", CLIENT_SECRET))
        if "nonce" in values:
            nonce = str(values.pop("nonce"))
        return line_id_token(server, nonce, secret=secret, **values)

    outcome = line_sign_in(server, make)
    assert outcome.profile is None
    assert isinstance(outcome.error, IdTokenError)
    assert message in str(outcome.error)
    assert CLIENT_SECRET not in str(outcome.error)


def test_only_line_accepts_a_channel_secret_signature(server: FaultServer) -> None:
    """The generic verification refuses HS256: only LINE's class checks it, with its secret."""
    from flask_social_oauth2.oidc.id_token import SAFE_ALGORITHMS

    assert "HS256" not in SAFE_ALGORITHMS
    assert [
        name for name, facts in PROVIDER_FACTS.items() if "HS256" in " ".join(facts.code_quirks)
    ] == ["line"]
