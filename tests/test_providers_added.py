"""The providers of issue 14, each through a whole sign-in with its recorded answers.

Every case runs the app's own route: the start, the callback with a code, the token request
and the profile request against a real loopback server serving the answers the provider's
documentation shows (``tests/fixtures/providers/<name>.*``, sources beside them). Each
provider's quirk has a test of its own here or in test_providers_quirks.py.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

import pytest
from fault_server import Behaviour, FaultServer
from provider_cases import SIGN_INS, adjusted_token, one_request
from provider_sign_in import (
    ACCESS_TOKEN,
    CLIENT_ID,
    CLIENT_SECRET,
    CODE,
    PROFILE_FIELDS,
    fixture,
    has_fixture,
    make_app,
    provider_block,
    serve_and_sign_in,
    sign_in,
    trimmed,
    values_of,
)
from test_providers import CASES as FIRST_CASES
from test_providers import TESTED_ELSEWHERE

from flask_social_oauth2 import OAuth2Info, OAuth2Settings
from flask_social_oauth2.errors import (
    AuthenticationError,
    InvalidCallbackError,
    ProfileRetrievalError,
    UnexpectedResponseError,
)
from flask_social_oauth2.providers import BUILTIN_PROVIDERS, PROVIDER_FACTS, docs
from flask_social_oauth2.providers.oauth2 import OAuth2Provider


@pytest.fixture
def server() -> Iterator[FaultServer]:
    """A real HTTP server on loopback that records every request."""
    with FaultServer() as running:
        yield running


def test_every_builtin_provider_has_a_sign_in_case() -> None:
    assert not set(SIGN_INS) & (set(FIRST_CASES) | TESTED_ELSEWHERE)
    assert set(SIGN_INS) | set(FIRST_CASES) | TESTED_ELSEWHERE == set(BUILTIN_PROVIDERS)


@pytest.mark.parametrize("name", sorted(SIGN_INS))
def test_sign_in_with_the_documented_answers(server: FaultServer, name: str) -> None:
    case = SIGN_INS[name]
    outcome = serve_and_sign_in(server, name, case, adjust_token=adjusted_token(server, name))

    assert outcome.status == 200, outcome.error
    assert outcome.profile is not None
    assert outcome.info is not None
    assert outcome.authorization_query["client_id"] == CLIENT_ID
    assert values_of(outcome.profile) == dict(case.expected)
    assert outcome.profile.provider_id == name
    assert (
        outcome.profile.full_name is None
        or outcome.profile.full_name != (outcome.profile.username)
        or name == "zoho"
    )  # Zoho's Display_Name is its display name, whatever it looks like
    token_requests = [request for request in server.requests if request.path == "/token"]
    assert len(token_requests) == 1
    access_token = outcome.info.access_token
    for request in server.requests:
        assert CLIENT_SECRET not in request.target
        if not case.token_in_url:
            assert access_token not in request.target, "the token must never be in a URL"
    if case.api_path is not None:
        served = [r for r in server.requests if r.path == case.api_path.split("?")[0]]
        assert len(served) == 1
        header = served[0].headers.get("Authorization")
        expected = None if case.scheme is None else f"{case.scheme} {access_token}"
        assert header == expected


@pytest.mark.parametrize("name", sorted(SIGN_INS))
def test_missing_fields_give_none(server: FaultServer, name: str) -> None:
    case = SIGN_INS[name]
    profile = trimmed(fixture(case.profile or name), case.trim) if case.api_path else None
    token_name = case.token or f"{name}.token"
    token = trimmed(fixture(token_name), case.token_trim) if has_fixture(token_name) else None
    outcome = serve_and_sign_in(
        server, name, case, profile=profile, token=token, adjust_token=adjusted_token(server, name)
    )
    assert outcome.profile is not None, outcome.error
    assert values_of(outcome.profile) == {
        **dict.fromkeys(PROFILE_FIELDS),
        "provider_key": case.expected["provider_key"],
    }


@pytest.mark.parametrize("name", sorted(name for name in SIGN_INS if SIGN_INS[name].api_path))
def test_answer_without_user_id_fails_the_sign_in(server: FaultServer, name: str) -> None:
    case = SIGN_INS[name]
    token_name = case.token or f"{name}.token"
    token = fixture(token_name) if has_fixture(token_name) else None
    if isinstance(token, dict):  # ids the token answer also carries
        token = trimmed(token, ("user_id", "orcid", "account_id", "open_id", "data.0.user_id"))
    outcome = serve_and_sign_in(
        server, name, case, profile={}, token=token, adjust_token=adjusted_token(server, name)
    )
    assert outcome.status == 502
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert outcome.profile is None


@pytest.mark.parametrize("name", sorted(name for name in SIGN_INS if SIGN_INS[name].api_path))
def test_refused_profile_request_fails_the_sign_in(server: FaultServer, name: str) -> None:
    case = SIGN_INS[name]
    token_name = case.token or f"{name}.token"
    token = fixture(token_name) if has_fixture(token_name) else {"access_token": ACCESS_TOKEN}
    server.set("/token", Behaviour.json(adjusted_token(server, name)(token)))
    server.set(case.api_path or "", Behaviour.json({"error": "invalid_token"}, status=401))
    outcome = sign_in(server, name, provider_block(server, name, case))
    assert outcome.status == 502
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert "401" in str(outcome.error)
    assert outcome.info is None
    assert ACCESS_TOKEN not in str(outcome.error)
    assert "EAACEdEose0" not in str(outcome.error)


#: The recorded error answers of a token endpoint (each ``.source.txt`` names its page). The
#: other ``.error.json`` fixtures are a profile endpoint's (Foursquare's ``meta``, PayPal's
#: ``debug_id``): test_providers_quirks.py serves those where they belong.
TOKEN_ERRORS: Final = frozenset({"apple", "line", "naver", "tiktok"})


def test_token_error_fixtures_are_token_endpoint_answers() -> None:
    recorded = {name for name in SIGN_INS if has_fixture(f"{name}.error")}
    assert recorded - TOKEN_ERRORS == {"foursquare", "paypal"}
    for name in TOKEN_ERRORS:
        assert "error" in fixture(f"{name}.error")


@pytest.mark.parametrize("name", sorted(SIGN_INS))
def test_token_error_answer_fails_the_sign_in(server: FaultServer, name: str) -> None:
    """The provider's documented token error answer where one is recorded, else RFC 6749
    5.2's: a 502 page naming the provider's error code, and no profile request."""
    answer = fixture(f"{name}.error") if name in TOKEN_ERRORS else {"error": "invalid_grant"}
    server.set("/token", Behaviour.json(answer, status=400))
    outcome = sign_in(server, name, provider_block(server, name, SIGN_INS[name]))
    assert outcome.status == 502
    assert isinstance(outcome.error, UnexpectedResponseError)
    assert outcome.error.error_code == answer["error"]
    assert outcome.profile is None
    assert [request.path for request in server.requests] == ["/token"]
    assert CODE not in str(outcome.error)
    assert CLIENT_SECRET not in str(outcome.error)


def test_docs_page_and_init_blocks_cover_the_added_providers() -> None:
    page = docs.render()
    for name in SIGN_INS:
        facts = PROVIDER_FACTS[name]
        assert f"## {facts.title}\n" in page
        assert docs.init_block(facts) in page


# -- quirks ------------------------------------------------------------------------------------


def test_atlassian_token_request_is_json(server: FaultServer) -> None:
    outcome = serve_and_sign_in(server, "atlassian", SIGN_INS["atlassian"])
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
    outcome = serve_and_sign_in(server, "atlassian", SIGN_INS["atlassian"])
    query = outcome.authorization_query
    assert (query["audience"], query["prompt"]) == ("api.atlassian.com", "consent")


def test_atlassian_block_may_override_the_prompt(server: FaultServer) -> None:
    block = provider_block(server, "atlassian", SIGN_INS["atlassian"])
    block["authorizationParams"] = {"prompt": "none"}
    outcome = sign_in(server, "atlassian", block)
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
    outcome = serve_and_sign_in(server, "dexcom", SIGN_INS["dexcom"])
    assert outcome.profile is not None
    assert outcome.profile.raw["recordType"] == "dataRange"
    assert PROVIDER_FACTS["dexcom"].no_profile_endpoint
    assert "no profile endpoint" in docs.render().split("## Dexcom")[1].split("##")[0]


def test_fitbit_token_request_uses_http_basic(server: FaultServer) -> None:
    serve_and_sign_in(server, "fitbit", SIGN_INS["fitbit"])
    request = one_request(server)
    expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
    assert request.headers["Authorization"] == f"Basic {expected}"
    assert "client_secret" not in request.form()


def test_fitbit_user_id_from_the_token_answer_when_the_profile_has_none(
    server: FaultServer,
) -> None:
    outcome = serve_and_sign_in(
        server, "fitbit", SIGN_INS["fitbit"], profile={"user": {"displayName": "Runner"}}
    )
    assert outcome.profile is not None
    assert (outcome.profile.provider_key, outcome.profile.full_name) == ("<ENCODED_ID>", "Runner")


def test_heroku_sends_the_versioned_accept_header(server: FaultServer) -> None:
    serve_and_sign_in(server, "heroku", SIGN_INS["heroku"])
    request = one_request(server, "/account")
    assert request.headers["Accept"] == "application/vnd.heroku+json; version=3"


def test_meetup_profile_is_a_graphql_post(server: FaultServer) -> None:
    serve_and_sign_in(server, "meetup", SIGN_INS["meetup"])
    request = one_request(server, "/gql-ext")
    assert request.method == "POST"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.body) == {"query": "query { self { id name } }"}


def test_meetup_graphql_error_is_a_profile_error(server: FaultServer) -> None:
    errors = {"data": None, "errors": [{"message": "Not authorized"}]}
    outcome = serve_and_sign_in(server, "meetup", SIGN_INS["meetup"], profile=errors)
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
        SIGN_INS["salesforce"],
        adjust_token=adjusted_token(server, "salesforce"),
    )
    assert outcome.info is not None
    request = one_request(server, SIGN_INS["salesforce"].api_path or "")
    assert request.target.endswith("?format=json")
    assert outcome.info.params["instance_url"] == "https://<MyDomainName>.my.salesforce.com"


@pytest.mark.parametrize("identity", [None, "http://evil.example/id/1", "not a url", 7])
def test_salesforce_unusable_identity_url_is_a_profile_error(
    server: FaultServer, identity: Any
) -> None:
    token = {**fixture("salesforce.token"), "id": identity}
    outcome = serve_and_sign_in(server, "salesforce", SIGN_INS["salesforce"], token=token)
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert [r.path for r in server.requests] == ["/token"]


def zoho_block(server: FaultServer, **changes: Any) -> dict[str, Any]:
    case = SIGN_INS["zoho"]
    block = provider_block(server, "zoho", case)
    block.pop("apiURL")
    block.update(changes)
    return block


def test_zoho_callback_names_the_data_centre(server: FaultServer) -> None:
    with FaultServer() as eu:
        eu.set("/oauth/v2/token", Behaviour.json(fixture("zoho.token")))
        eu.set("/oauth/user/info", Behaviour.json(fixture("zoho")))
        block = zoho_block(server, customProperties={"accountsServers": eu.url})
        outcome = sign_in(server, "zoho", block, callback={"accounts-server": eu.url})
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
    outcome = sign_in(server, "zoho", zoho_block(server), callback={"accounts-server": named})
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


# -- the README's count ------------------------------------------------------------------------


def test_readme_states_the_generated_provider_count() -> None:
    start, end = docs.COUNT_MARKERS
    text = docs.README.read_text(encoding="utf-8")
    assert f"{start}{len(BUILTIN_PROVIDERS)}{end} providers are built in" in text
    assert docs.with_count(text) == text


def test_docs_check_reports_a_stale_readme_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    start, end = docs.COUNT_MARKERS
    readme = tmp_path / "README.md"
    readme.write_text(f"Intro. {start}24{end} providers are built in.\n", encoding="utf-8")
    page = tmp_path / "providers.md"
    page.write_text(docs.render(), encoding="utf-8")
    monkeypatch.setattr(docs, "README", readme)
    monkeypatch.setattr(docs, "DOCS_PAGE", page)
    assert docs.main(["--check"]) == 1
    assert "README.md is stale" in capsys.readouterr().out
    assert docs.main([]) == 0
    count = len(BUILTIN_PROVIDERS)
    assert (
        readme.read_text(encoding="utf-8")
        == f"Intro. {start}{count}{end} providers are built in.\n"
    )
    assert docs.main(["--check"]) == 0


# -- status notes, OpenID Connect issuers, callback errors ---------------------------------


@pytest.mark.parametrize(
    ("name", "note"),
    [
        ("authentiq", "**Status unconfirmed.**"),
        ("fitbit", "**Legacy.**"),
        ("foursquare", "**Legacy.**"),
        ("nylas", "**Legacy, status unconfirmed.**"),
    ],
)
def test_legacy_or_unconfirmed_providers_say_so_first(name: str, note: str) -> None:
    assert PROVIDER_FACTS[name].docs.startswith(note)
    assert docs.section(PROVIDER_FACTS[name]).split("\n\n")[1].startswith(note)


@pytest.mark.parametrize(
    ("name", "issuer"),
    [
        ("authentiq", "https://connect.authentiq.io"),
        ("kakao", "https://kauth.kakao.com"),
        ("line", "https://access.line.me"),
    ],
)
def test_fixed_openid_connect_issuer(name: str, issuer: str) -> None:
    facts = PROVIDER_FACTS[name]
    block = {
        "authorizationURL": facts.authorization_url,
        "accessTokenURL": facts.token_url,
        "redirectURL": f"/authenticate/{name}",
        "clientID": "c",
        "clientSecret": "s",
    }
    cls = BUILTIN_PROVIDERS[name]
    with_openid = OAuth2Settings.from_config({**block, "scope": "openid"}, provider=name)
    without = OAuth2Settings.from_config({**block, "scope": "profile"}, provider=name)
    assert cls.issuer_for(with_openid) == issuer
    assert cls.issuer_for(without) is None


@pytest.mark.parametrize("error", ["login_required", "interaction_required"])
def test_orcid_documented_callback_error_fails_the_sign_in(server: FaultServer, error: str) -> None:
    app_block = provider_block(server, "orcid", SIGN_INS["orcid"])
    outcome = sign_in_with_error(server, "orcid", app_block, error)
    assert outcome == 400
    assert server.count() == 0


def sign_in_with_error(server: FaultServer, name: str, block: dict[str, Any], error: str) -> int:
    """Start a sign-in and come back with ``error`` as the provider would: the status."""
    app, _ = make_app({name: block})
    client = app.test_client()
    started = client.get(f"/authenticate/{name}")
    state = dict(parse_qsl(urlsplit(started.headers["Location"]).query))["state"]
    answer = client.get(f"/authenticate/{name}", query_string={"error": error, "state": state})
    return answer.status_code


#: Flask-Dance's OAuth 2 providers (flask_dance/contrib, 7.x; ``jira`` and ``twitter`` there are
#: OAuth 1, Jira's OAuth 2 is ``atlassian``) and Silhouette's OAuth 2 providers (play-silhouette
#: impl/providers/oauth2).
FLASK_DANCE_OAUTH2: Final = frozenset(
    {
        "atlassian",
        "authentiq",
        "azure",
        "bitbucket",
        "cognito",
        "dexcom",
        "digitalocean",
        "discord",
        "dropbox",
        "facebook",
        "fitbit",
        "github",
        "gitlab",
        "google",
        "heroku",
        "instagram",
        "linkedin",
        "meetup",
        "nylas",
        "okta",
        "orcid",
        "osm",
        "reddit",
        "salesforce",
        "slack",
        "spotify",
        "strava",
        "twitch",
        "vk",
        "zoho",
    }
)
SILHOUETTE_OAUTH2: Final = frozenset(
    {"auth0", "dropbox", "facebook", "foursquare", "github", "gitlab", "google", "instagram"}
    | {"linkedin", "vk"}
)


def test_builtin_list_is_a_strict_superset_of_flask_dance_and_silhouette() -> None:
    builtin = set(BUILTIN_PROVIDERS)
    assert builtin > FLASK_DANCE_OAUTH2
    assert builtin > SILHOUETTE_OAUTH2
    assert len(builtin) == 51  # 50, and bluesky (issue 17)


def test_zoho_refresh_goes_to_the_data_centre_of_the_sign_in(server: FaultServer) -> None:
    with FaultServer() as eu:
        eu.set("/oauth/v2/token", Behaviour.json(fixture("zoho.token")))
        eu.set("/oauth/user/info", Behaviour.json(fixture("zoho")))
        block = zoho_block(server, customProperties={"accountsServers": eu.url})
        outcome = sign_in(server, "zoho", block, callback={"accounts-server": eu.url})
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
