"""What the later built-in providers do their own way (token requests, profile answers,
callbacks, refreshes), LINE's HS256 ID tokens among them; the first providers' own ways are
tested beside their cases in test_builtin_providers.py.

Each test runs a whole sign-in through the app's route against a loopback server that serves
the provider's recorded answers (the cases: :mod:`provider_cases`; the harness:
:mod:`provider_sign_in`).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fault_server import Behaviour, FaultServer
from helpers import sign_in
from provider_cases import CASES, adjusted_token, one_request
from provider_sign_in import (
    ACCESS_TOKEN,
    CLIENT_ID,
    CLIENT_SECRET,
    CODE,
    Outcome,
    fixture,
    make_app,
    provider_block,
    route_sign_in,
    serve_and_sign_in,
    trimmed,
)

from flask_social_oauth2 import OAuth2Info, OAuth2Settings
from flask_social_oauth2.errors import (
    AuthenticationError,
    IdTokenError,
    InvalidCallbackError,
    ProfileRetrievalError,
)
from flask_social_oauth2.providers import BUILTIN_PROVIDERS, PROVIDER_FACTS, docs
from flask_social_oauth2.providers.oauth2 import OAuth2Provider


@pytest.fixture
def server() -> Iterator[FaultServer]:
    """A real HTTP server on loopback that records every request."""
    with FaultServer() as running:
        yield running


# -- Foursquare to osu! ----------------------------------------------------------------------------


def test_foursquare_token_and_version_date_in_the_query(server: FaultServer) -> None:
    serve_and_sign_in(server, "foursquare", CASES["foursquare"])
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
    case = CASES["foursquare"]
    server.set("/token", Behaviour.json({"access_token": ACCESS_TOKEN}))
    server.set("/v2/users/self", Behaviour.json(fixture("foursquare.error"), status=400))
    outcome = route_sign_in(server, "foursquare", provider_block(server, "foursquare", case))
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert ACCESS_TOKEN not in str(outcome.error)


@pytest.mark.parametrize("wrapped", [True, False])
def test_instagram_token_answer_wrapped_or_flat(server: FaultServer, wrapped: bool) -> None:
    entry = fixture("instagram.token")["data"][0]
    token = {"data": [entry]} if wrapped else entry
    outcome = serve_and_sign_in(server, "instagram", CASES["instagram"], token=token)
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
    outcome = serve_and_sign_in(server, "kakao", CASES["kakao"], profile=answer)
    assert outcome.profile is not None
    assert (outcome.profile.email, outcome.profile.email_verified) == (
        "sample@sample.com",
        expected,
    )


def test_naver_wrapped_answer_and_string_expiry(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "naver", CASES["naver"])
    assert outcome.info is not None
    assert outcome.profile is not None
    assert outcome.info.expires_in == 3600
    assert outcome.profile.raw["resultcode"] == "00"


def test_naver_nickname_when_there_is_no_name(server: FaultServer) -> None:
    answer = trimmed(fixture("naver"), ("response.name",))
    outcome = serve_and_sign_in(server, "naver", CASES["naver"], profile=answer)
    assert outcome.profile is not None
    assert outcome.profile.full_name == "OpenAPI"


def test_yandex_profile_request(server: FaultServer) -> None:
    serve_and_sign_in(server, "yandex", CASES["yandex"])
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
    outcome = serve_and_sign_in(server, "yandex", CASES["yandex"], profile=answer)
    assert outcome.profile is not None
    assert outcome.profile.avatar_url == avatar


def test_cognito_basic_auth_and_string_booleans(server: FaultServer) -> None:
    answer = {**fixture("cognito"), "email_verified": "false"}
    outcome = serve_and_sign_in(server, "cognito", CASES["cognito"], profile=answer)
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
    outcome = serve_and_sign_in(server, "notion", CASES["notion"])
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
    outcome = serve_and_sign_in(server, "notion", CASES["notion"])
    assert outcome.authorization_query["owner"] == "user"


def test_notion_workspace_owner_is_a_profile_error(server: FaultServer) -> None:
    token = {**fixture("notion.token"), "owner": {"type": "workspace", "workspace": True}}
    outcome = serve_and_sign_in(server, "notion", CASES["notion"], token=token)
    assert isinstance(outcome.error, ProfileRetrievalError)


def test_hubspot_token_in_the_path_is_quoted(server: FaultServer) -> None:
    token = "CK/Dp+u?n#P=="
    quoted = "CK%2FDp%2Bu%3Fn%23P%3D%3D"
    path = f"/oauth/v1/access-tokens/{quoted}"
    server.set(path, Behaviour.json(fixture("hubspot")))
    server.set("/token", Behaviour.json({"access_token": token, "token_type": "bearer"}))
    outcome = route_sign_in(server, "hubspot", provider_block(server, "hubspot", CASES["hubspot"]))
    assert outcome.profile is not None, outcome.error
    assert server.count(path) == 1
    assert outcome.profile.raw["hub_id"] == 62515


def test_tiktok_sends_client_key(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "tiktok", CASES["tiktok"])
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
    outcome = serve_and_sign_in(server, "tiktok", CASES["tiktok"], profile=answer)
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert repr(code or "<missing>") in str(outcome.error)


def test_paypal_basic_auth_and_openid_schema(server: FaultServer) -> None:
    serve_and_sign_in(server, "paypal", CASES["paypal"])
    assert one_request(server).headers["Authorization"].startswith("Basic ")
    assert "client_secret" not in one_request(server).form()
    profile_request = one_request(server, "/v1/identity/openidconnect/userinfo")
    assert profile_request.query == {"schema": ["openid"]}


def test_paypal_documented_error_answer_fails_the_sign_in(server: FaultServer) -> None:
    case = CASES["paypal"]
    server.set("/token", Behaviour.json({"access_token": ACCESS_TOKEN}))
    server.set(case.api_path or "", Behaviour.json(fixture("paypal.error"), status=401))
    outcome = route_sign_in(server, "paypal", provider_block(server, "paypal", case))
    assert isinstance(outcome.error, ProfileRetrievalError)


def test_osu_numeric_id_is_a_string(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "osu", CASES["osu"])
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
    block = provider_block(server, "line", CASES["line"])
    block.update(scope="profile openid email", customProperties={"issuer": server.url})

    def answer(request: Any) -> Behaviour:
        nonce = started["nonce"]
        token = {**fixture("line.token"), "id_token": make_token(nonce)}
        return Behaviour.json(token)

    started: dict[str, str] = {}
    server.set("/token", Behaviour.dynamic(answer))
    return route_sign_in(server, "line", block, on_start=started.update)


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


# -- Atlassian to Zoho ------------------------------------------------------------------------


def test_atlassian_token_request_is_json(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "atlassian", CASES["atlassian"])
    assert outcome.profile is not None
    request = one_request(server)
    assert request.headers["Content-Type"] == "application/json"
    body = json.loads(request.body)
    assert body["client_secret"] == CLIENT_SECRET
    assert (body["code"], body["grant_type"], body["client_id"]) == (
        CODE,
        "authorization_code",
        CLIENT_ID,
    )


def test_atlassian_sends_the_audience_and_consent(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "atlassian", CASES["atlassian"])
    query = outcome.authorization_query
    assert (query["audience"], query["prompt"]) == ("api.atlassian.com", "consent")


def test_atlassian_block_may_override_the_prompt(server: FaultServer) -> None:
    block = provider_block(server, "atlassian", CASES["atlassian"])
    block["authorizationParams"] = {"prompt": "none"}
    outcome = route_sign_in(server, "atlassian", block)
    assert outcome.authorization_query["prompt"] == "none"
    assert outcome.authorization_query["audience"] == "api.atlassian.com"


def test_azure_is_microsoft_under_another_name() -> None:
    azure, microsoft = PROVIDER_FACTS["azure"], PROVIDER_FACTS["microsoft"]
    assert (azure.token_url, azure.profile, azure.issuer_from_token_url) == (
        microsoft.token_url,
        microsoft.profile,
        microsoft.issuer_from_token_url,
    )
    settings = OAuth2Settings.from_config(
        {
            "authorizationURL": "https://login.microsoftonline.com/contoso-id/oauth2/v2.0/authorize",
            "accessTokenURL": "https://login.microsoftonline.com/contoso-id/oauth2/v2.0/token",
            "redirectURL": "/authenticate/azure",
            "clientID": "c",
            "clientSecret": "s",
            "scope": "openid profile",
        },
        provider="azure",
    )
    issuer = BUILTIN_PROVIDERS["azure"].issuer_for(settings)
    assert issuer == "https://login.microsoftonline.com/contoso-id/v2.0"


def test_dexcom_has_no_profile_only_the_user_id(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "dexcom", CASES["dexcom"])
    assert outcome.profile is not None
    assert outcome.profile.raw["recordType"] == "dataRange"
    assert PROVIDER_FACTS["dexcom"].no_profile_endpoint
    assert "no profile endpoint" in docs.render().split("## Dexcom")[1].split("##")[0]


def test_fitbit_token_request_uses_http_basic(server: FaultServer) -> None:
    serve_and_sign_in(server, "fitbit", CASES["fitbit"])
    request = one_request(server)
    expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
    assert request.headers["Authorization"] == f"Basic {expected}"
    assert "client_secret" not in request.form()


def test_fitbit_user_id_from_the_token_answer_when_the_profile_has_none(
    server: FaultServer,
) -> None:
    outcome = serve_and_sign_in(
        server, "fitbit", CASES["fitbit"], profile={"user": {"displayName": "Runner"}}
    )
    assert outcome.profile is not None
    assert (outcome.profile.provider_key, outcome.profile.full_name) == ("<ENCODED_ID>", "Runner")


def test_heroku_sends_the_versioned_accept_header(server: FaultServer) -> None:
    serve_and_sign_in(server, "heroku", CASES["heroku"])
    request = one_request(server, "/account")
    assert request.headers["Accept"] == "application/vnd.heroku+json; version=3"


def test_meetup_profile_is_a_graphql_post(server: FaultServer) -> None:
    serve_and_sign_in(server, "meetup", CASES["meetup"])
    request = one_request(server, "/gql-ext")
    assert request.method == "POST"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.body) == {"query": "query { self { id name } }"}


def test_meetup_graphql_error_is_a_profile_error(server: FaultServer) -> None:
    errors = {"data": None, "errors": [{"message": "Not authorized"}]}
    outcome = serve_and_sign_in(server, "meetup", CASES["meetup"], profile=errors)
    assert isinstance(outcome.error, ProfileRetrievalError)


@pytest.mark.parametrize(
    ("token_url", "issuer", "userinfo"),
    [
        ("https://orcid.org/oauth/token", "https://orcid.org", "https://orcid.org/oauth/userinfo"),
        (
            "https://sandbox.orcid.org/oauth/token",
            "https://sandbox.orcid.org",
            "https://sandbox.orcid.org/oauth/userinfo",
        ),
    ],
)
def test_orcid_and_its_sandbox(token_url: str, issuer: str, userinfo: str) -> None:
    settings = OAuth2Settings.from_config(
        {
            "authorizationURL": token_url.replace("/token", "/authorize"),
            "accessTokenURL": token_url,
            "redirectURL": "/authenticate/orcid",
            "clientID": "c",
            "clientSecret": "s",
            "scope": "openid",
        },
        provider="orcid",
    )
    cls = BUILTIN_PROVIDERS["orcid"]
    assert cls.issuer_for(settings) == issuer
    assert cls.default_profile_url_for(settings) == userinfo
    assert cls.settings_problems(settings) == []


def test_orcid_other_token_url_needs_api_url() -> None:
    settings = OAuth2Settings.from_config(
        {
            "authorizationURL": "https://orcid.example/oauth/authorize",
            "accessTokenURL": "https://orcid.example/oauth/token",
            "redirectURL": "/authenticate/orcid",
            "clientID": "c",
            "clientSecret": "s",
        },
        provider="orcid",
    )
    problems = BUILTIN_PROVIDERS["orcid"].settings_problems(settings)
    assert [problem.key for problem in problems] == ["apiURL"]


def test_salesforce_profile_is_the_identity_url_of_the_token_answer(server: FaultServer) -> None:
    outcome = serve_and_sign_in(
        server,
        "salesforce",
        CASES["salesforce"],
        adjust_token=adjusted_token(server, "salesforce"),
    )
    assert outcome.info is not None
    request = one_request(server, CASES["salesforce"].api_path or "")
    assert request.target.endswith("?format=json")
    assert outcome.info.params["instance_url"] == "https://<MyDomainName>.my.salesforce.com"


@pytest.mark.parametrize("identity", [None, "http://evil.example/id/1", "not a url", 7])
def test_salesforce_unusable_identity_url_is_a_profile_error(
    server: FaultServer, identity: Any
) -> None:
    token = {**fixture("salesforce.token"), "id": identity}
    outcome = serve_and_sign_in(server, "salesforce", CASES["salesforce"], token=token)
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert [r.path for r in server.requests] == ["/token"]


def zoho_block(server: FaultServer, **changes: Any) -> dict[str, Any]:
    case = CASES["zoho"]
    block = provider_block(server, "zoho", case)
    block.pop("apiURL")
    block.update(changes)
    return block


def test_zoho_callback_names_the_data_centre(server: FaultServer) -> None:
    with FaultServer() as eu:
        eu.set("/oauth/v2/token", Behaviour.json(fixture("zoho.token")))
        eu.set("/oauth/user/info", Behaviour.json(fixture("zoho")))
        block = zoho_block(server, customProperties={"accountsServers": eu.url})
        outcome = route_sign_in(server, "zoho", block, callback={"accounts-server": eu.url})
        assert outcome.profile is not None, outcome.error
        assert outcome.profile.provider_key == "123446"
        assert server.count() == 0  # nothing went to the configured server
        token = one_request(eu, "/oauth/v2/token")
        assert token.form()["client_secret"] == [CLIENT_SECRET]
        profile_request = one_request(eu, "/oauth/user/info")
        access_token = fixture("zoho.token")["access_token"]
        assert profile_request.headers["Authorization"] == f"Zoho-oauthtoken {access_token}"
    assert outcome.info is not None
    assert outcome.info.params["accounts-server"] == eu.url


@pytest.mark.parametrize(
    "named", ["https://accounts.zoho.evil.example", "http://127.0.0.2:1", "javascript:alert(1)"]
)
def test_zoho_refuses_a_server_not_allowed(server: FaultServer, named: str) -> None:
    outcome = route_sign_in(server, "zoho", zoho_block(server), callback={"accounts-server": named})
    assert outcome.status == 400
    assert isinstance(outcome.error, InvalidCallbackError)
    assert server.count() == 0  # neither the code nor the secret was sent anywhere


def test_zoho_data_centres_are_allowed() -> None:
    cls = BUILTIN_PROVIDERS["zoho"]
    facts = PROVIDER_FACTS["zoho"]
    assert facts.callback_token_server is not None
    assert "https://accounts.zoho.eu" in facts.callback_token_server.servers
    settings = OAuth2Settings.from_config(
        {
            "authorizationURL": "https://accounts.zoho.com/oauth/v2/auth",
            "accessTokenURL": "https://accounts.zoho.com/oauth/v2/token",
            "redirectURL": "/authenticate/zoho",
            "clientID": "c",
            "clientSecret": "s",
            "customProperties": {"accountsServers": "http://evil.example"},
        },
        provider="zoho",
    )
    problems = cls.settings_problems(settings)
    assert [problem.key for problem in problems] == ["customProperties.accountsServers"]


@pytest.mark.parametrize("error", ["login_required", "interaction_required"])
def test_orcid_documented_callback_error_fails_the_sign_in(server: FaultServer, error: str) -> None:
    app_block = provider_block(server, "orcid", CASES["orcid"])
    outcome = sign_in_with_error(server, "orcid", app_block, error)
    assert outcome == 400
    assert server.count() == 0


def sign_in_with_error(server: FaultServer, name: str, block: dict[str, Any], error: str) -> int:
    """Start a sign-in and come back with ``error`` as the provider would: the status."""
    app, _ = make_app({name: block})
    return int(sign_in(app.test_client(), name, callback={"error": error}).status_code)


def test_zoho_refresh_goes_to_the_data_centre_of_the_sign_in(server: FaultServer) -> None:
    with FaultServer() as eu:
        eu.set("/oauth/v2/token", Behaviour.json(fixture("zoho.token")))
        eu.set("/oauth/user/info", Behaviour.json(fixture("zoho")))
        block = zoho_block(server, customProperties={"accountsServers": eu.url})
        outcome = route_sign_in(server, "zoho", block, callback={"accounts-server": eu.url})
        assert outcome.info is not None
        renewed_answer = {"access_token": "1000.renewed", "token_type": "Bearer"}
        eu.set("/oauth/v2/token", Behaviour.json(renewed_answer))
        app, social = make_app({"zoho": block})
        with app.app_context():
            provider = social.provider("zoho")
            assert isinstance(provider, OAuth2Provider)
            renewed = provider.refresh(outcome.info)
        assert renewed.access_token == "1000.renewed"
        assert renewed.params["accounts-server"] == eu.url
        assert renewed.refresh_token == "<REFRESH_TOKEN>"
        assert eu.count("/oauth/v2/token") == 2
        refresh_body = [r for r in eu.requests if r.path == "/oauth/v2/token"][1].form()
        assert refresh_body["grant_type"] == ["refresh_token"]
    assert server.count() == 0


def test_zoho_refresh_refuses_a_server_not_allowed(server: FaultServer) -> None:
    info = OAuth2Info(
        access_token="a",
        refresh_token="r",
        params={"accounts-server": "https://accounts.zoho.evil.example"},
    )
    app, social = make_app({"zoho": zoho_block(server)})
    with app.app_context():
        provider = social.provider("zoho")
        assert isinstance(provider, OAuth2Provider)
        with pytest.raises(AuthenticationError, match="not allowed"):
            provider.refresh(info)
    assert server.count() == 0


def test_refresh_without_a_callback_server_uses_the_access_token_url(server: FaultServer) -> None:
    server.set("/token", Behaviour.json({"access_token": "renewed", "token_type": "Bearer"}))
    info = OAuth2Info(access_token="a", refresh_token="r")
    app, social = make_app({"zoho": zoho_block(server)})
    with app.app_context():
        provider = social.provider("zoho")
        assert isinstance(provider, OAuth2Provider)
        assert provider.refresh(info).access_token == "renewed"
    assert server.count("/token") == 1
