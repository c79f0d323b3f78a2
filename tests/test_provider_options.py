"""A block's customProperties are parsed once, when its provider is made, into one typed, frozen
record; bad values fail init_app with every problem listed."""

from __future__ import annotations

import dataclasses
from typing import Any, get_args

import pytest
from flask import Flask
from helpers import MakeApp, discovery_block, local_provider, sign_in, valid_block

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.config import provider_options
from flask_social_oauth2.config.provider_options import (
    SAFE_ALGORITHMS,
    PropertyReader,
    ProviderOptions,
    read_provider_options,
)
from flask_social_oauth2.config.settings import OAuth2Settings
from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.oauth import client_auth
from flask_social_oauth2.oauth.client_auth import ClientAuthMethod
from flask_social_oauth2.providers import oauth2


def parsed(**properties: str) -> tuple[ProviderOptions, list[str]]:
    settings = OAuth2Settings.from_config(valid_block(customProperties=properties))
    options, problems = read_provider_options(settings)
    return options, [f"{problem.key}: {problem.message}" for problem in problems]


# -- each field --------------------------------------------------------------------------------


def test_a_block_without_custom_properties_reads_the_defaults() -> None:
    options, problems = parsed()
    assert problems == []
    assert options == ProviderOptions()
    assert options.pushed_authorization == "auto"
    assert options.dpop is False
    assert options.id_token_algorithms == SAFE_ALGORITHMS
    assert options.id_token_leeway == 60
    assert options.token_auth_method is None
    assert options.issuer is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.dpop = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("properties", "field", "value"),
    [
        (
            {"tokenEndpointAuthMethod": "client_secret_basic"},
            "token_auth_method",
            "client_secret_basic",
        ),
        ({"keyID": "k-1"}, "key_id", "k-1"),
        ({"pushedAuthorization": "off"}, "pushed_authorization", "off"),
        (
            {"pushedAuthorizationURL": "https://op.example/par"},
            "pushed_authorization_url",
            "https://op.example/par",
        ),
        ({"dpop": "true"}, "dpop", True),
        ({"dpop": "false"}, "dpop", False),
        ({"issuer": "https://op.example"}, "issuer", "https://op.example"),
        (
            {"discoveryURL": "https://op.example/t/.well-known/openid-configuration"},
            "issuer",
            "https://op.example/t",
        ),
        (
            {"discoveryURL": "https://op.example/.well-known/oauth-authorization-server/t"},
            "issuer",
            "https://op.example/t",
        ),
        (
            {"issuer": "https://op.example", "discoveryURL": "https://op.example/meta.json"},
            "discovery_url",
            "https://op.example/meta.json",
        ),
        (
            {"idTokenAlgorithms": "ES256  RS256"},
            "id_token_algorithms",
            frozenset({"ES256", "RS256"}),
        ),
        ({"idTokenLeeway": "0"}, "id_token_leeway", 0),
        ({"idTokenLeeway": "300"}, "id_token_leeway", 300),
        (
            {"revocationURL": "https://op.example/revoke"},
            "revocation_url",
            "https://op.example/revoke",
        ),
        (
            {"apiBaseURL": "http://127.0.0.1:8000/api/"},
            "api_base_url",
            "http://127.0.0.1:8000/api/",
        ),
        (
            {"endSessionURL": "https://op.example/logout"},
            "end_session_url",
            "https://op.example/logout",
        ),
        ({"responseMode": "form_post"}, "response_mode", "form_post"),
        ({"title": "Acme ID"}, "title", "Acme ID"),
        ({"allowLoopback": "true"}, "allow_loopback", True),
        ({"allowLoopback": "yes"}, "allow_loopback", False),  # never checked: only "true" is on
    ],
)
def test_each_key_is_read_into_its_typed_field(
    properties: dict[str, str], field: str, value: Any
) -> None:
    options, problems = parsed(**properties)
    assert problems == []
    assert getattr(options, field) == value


@pytest.mark.parametrize(
    ("properties", "problem"),
    [
        (
            {"tokenEndpointAuthMethod": "secret"},
            "customProperties.tokenEndpointAuthMethod: must be one of client_secret_post,"
            " client_secret_basic, private_key_jwt, client_secret_jwt, none",
        ),
        (
            {"pushedAuthorization": "always"},
            "customProperties.pushedAuthorization: must be one of auto, required, off",
        ),
        (
            {"pushedAuthorizationURL": "http://op.example/par"},
            "customProperties.pushedAuthorizationURL: must use https (plain http is accepted"
            " only for loopback hosts)",
        ),
        ({"dpop": "yes"}, "customProperties.dpop: must be true or false"),
        (
            {"issuer": "https://op.example/?tenant=1"},
            "customProperties.issuer: must not contain a query (OpenID Connect Discovery 2)",
        ),
        (
            {"discoveryURL": "https://op.example/meta.json"},
            "customProperties.discoveryURL: does not end in /.well-known/openid-configuration,"
            " so the issuer cannot be derived from it: set customProperties.issuer too",
        ),
        (
            {"idTokenAlgorithms": "RS256 HS256 none"},
            "customProperties.idTokenAlgorithms: must list asymmetric algorithms among "
            + ", ".join(sorted(SAFE_ALGORITHMS))
            + "; not 'HS256', 'none'",
        ),
        (
            {"idTokenLeeway": "301"},
            "customProperties.idTokenLeeway: must be a whole number of seconds from 0 to 300"
            " (ASCII digits)",
        ),
        (
            {"idTokenLeeway": "²"},
            "customProperties.idTokenLeeway: must be a whole number of seconds from 0 to 300"
            " (ASCII digits)",
        ),
        (
            {"revocationURL": "ftp://op.example/revoke"},
            "customProperties.revocationURL: must be an absolute http(s) URL",
        ),
        (
            {"responseMode": "fragment"},
            "customProperties.responseMode: must be one of query, form_post",
        ),
    ],
)
def test_a_wrong_value_is_a_problem_naming_its_key(
    properties: dict[str, str], problem: str
) -> None:
    _, problems = parsed(**properties)
    assert problems == [problem]


def test_every_wrong_value_is_listed_and_the_record_keeps_its_defaults() -> None:
    options, problems = parsed(
        dpop="maybe", idTokenLeeway="-1", responseMode="x", pushedAuthorization="y", title="T"
    )
    keys = [problem.split(":")[0] for problem in problems]
    assert keys == [
        "customProperties.pushedAuthorization",
        "customProperties.dpop",
        "customProperties.idTokenLeeway",
        "customProperties.responseMode",
    ]
    assert (options.dpop, options.id_token_leeway, options.response_mode) == (False, 60, None)
    assert options.pushed_authorization == "auto"
    assert options.title == "T"


def test_the_reader_reads_each_kind_of_value() -> None:
    settings = OAuth2Settings.from_config(
        valid_block(
            customProperties={
                "list": " a  b ",
                "on": "true",
                "odd": "TRUE",
                "url": "http://example.test/x",
                "pick": "c",
            }
        )
    )
    read = PropertyReader(settings)
    assert (read.words("list"), read.words("missing")) == (("a", "b"), ())
    assert (read.flag("on"), read.flag("missing"), read.is_true("odd")) == (True, False, False)
    assert read.text("missing") is None
    assert read.url("url") == "http://example.test/x"
    assert read.choice("pick", ("a", "b")) is None
    assert [problem.key for problem in read.problems] == [
        "customProperties.url",
        "customProperties.pick",
    ]
    read.flag("odd")
    assert str(read.problems[-1]) == "key 'customProperties.odd': must be true or false"


def test_unknown_keys_are_kept_in_the_settings_and_ignored() -> None:
    settings = OAuth2Settings.from_config(valid_block(customProperties={"team": "blue"}))
    options, problems = read_provider_options(settings)
    assert (options, problems) == (ProviderOptions(), [])
    assert settings.custom_properties["team"] == "blue"


def test_the_client_auth_methods_are_the_typed_ones() -> None:
    assert get_args(ClientAuthMethod) == provider_options.CLIENT_AUTH_METHODS


# -- once, at init_app ---------------------------------------------------------------------------


def test_bad_values_fail_init_app_with_every_problem_listed() -> None:
    app = Flask("bad")
    app.config.update(
        SECRET_KEY="k",
        SOCIAL_OAUTH2_PROVIDERS={
            "one": valid_block(
                redirectURL="/authenticate/one",
                customProperties={"dpop": "on", "idTokenLeeway": "soon"},
            ),
            "two": valid_block(
                redirectURL="/authenticate/two",
                customProperties={"apiBaseURL": "http://x.example/"},
            ),
        },
    )
    with pytest.raises(ConfigurationError) as raised:
        SocialOAuth2(app)
    found = [(problem.provider, problem.key) for problem in raised.value.problems]
    assert found == [
        ("one", "customProperties.dpop"),
        ("one", "customProperties.idTokenLeeway"),
        ("two", "customProperties.apiBaseURL"),
    ]


def test_the_record_is_built_at_init_app_and_a_sign_in_never_parses_again(
    make_app: MakeApp, idp: LocalIdentityProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app({"local": discovery_block(idp, idTokenLeeway="5", title="Local ID")})
    provider = local_provider(app)
    assert provider.options.issuer == idp.issuer
    assert provider.options.id_token_leeway == 5
    assert provider.title == "Local ID"
    calls: list[OAuth2Settings] = []

    def counted(settings: OAuth2Settings) -> Any:
        calls.append(settings)
        return read_provider_options(settings)

    monkeypatch.setattr(oauth2, "read_provider_options", counted)
    monkeypatch.setattr(provider_options, "read_provider_options", counted)
    monkeypatch.setattr(client_auth, "read_provider_options", counted)
    with app.test_client() as client:
        answer = sign_in(client)
        assert answer.status_code == 302, answer.text
    assert calls == []
    assert local_provider(app).options is provider.options


def test_a_derived_provider_has_its_own_record(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": discovery_block(idp)})
    provider = local_provider(app)
    derived = provider.with_settings(
        lambda s: s.replace(custom_properties={**s.custom_properties, "title": "Other"})
    )
    assert derived.options.title == "Other"
    assert provider.options.title is None
    assert derived.options.issuer == provider.options.issuer
    with pytest.raises(ConfigurationError, match=r"customProperties\.dpop"):
        provider.with_settings(
            lambda s: s.replace(custom_properties={**s.custom_properties, "dpop": "1"})
        )


# -- the keys one provider reads -------------------------------------------------------------------


def made(name: str, **properties: str) -> Any:
    from flask_social_oauth2.providers import BUILTIN_PROVIDERS

    settings = OAuth2Settings.from_config(
        valid_block(redirectURL=f"/authenticate/{name}", customProperties=properties)
    )
    return BUILTIN_PROVIDERS[name](name, settings)


def test_the_hooks_parse_their_own_keys_into_their_own_record() -> None:
    from flask_social_oauth2.providers.apple import AppleOptions
    from flask_social_oauth2.providers.bluesky import BlueskyOptions
    from flask_social_oauth2.providers.facebook import FacebookOptions
    from flask_social_oauth2.providers.linkedin import LinkedInOptions

    apple = made("apple", teamID="ABCDE12345", keyID="KEY1234567")
    assert apple.options.own_as(AppleOptions) == AppleOptions(team_id="ABCDE12345")
    assert apple.options.key_id == "KEY1234567"
    assert made("facebook", appsecretProof="true").options.own == FacebookOptions(True)
    assert made("facebook").options.own == FacebookOptions(False)
    linkedin = made("linkedin", emailURL="https://api.linkedin.example/email")
    assert linkedin.options.own == LinkedInOptions("https://api.linkedin.example/email", None)
    bluesky = made("bluesky", plcURL="https://plc.example", clientName="Demo", allowLoopback="true")
    options = bluesky.options.own_as(BlueskyOptions)
    assert (options.plc_url, options.handle_resolver, options.dns_resolver) == (
        "https://plc.example",
        None,
        None,
    )
    assert options.display == {"clientName": "Demo"}
    assert bluesky.options.allow_loopback is True
    assert made("bluesky").options.own_as(BlueskyOptions).plc_url == "https://plc.directory"
    assert made("github").options.own is None
    with pytest.raises(TypeError, match="AppleOptions"):
        apple.options.own_as(BlueskyOptions)


def test_the_facts_keys_are_parsed_once_with_their_rules() -> None:
    zoho = made("zoho", accountsServers="https://accounts.zoho.eu  https://accounts.zoho.in")
    assert zoho.facts_options.accounts_servers == (
        "https://accounts.zoho.eu",
        "https://accounts.zoho.in",
    )
    assert made("reddit", userAgent="web:demo:1.0").facts_options.user_agent == "web:demo:1.0"
    assert made(
        "github", emailsURL="https://ghe.example/api/v3/user/emails"
    ).facts_options.emails_url
    vk = made("vk", apiVersion="5.199")
    assert vk.facts_options.profile_params == {"apiVersion": "5.199"}
    assert vk.profile_form(make_info())["v"] == "5.199"
    assert made("vk").profile_form(make_info())["v"] == vk.facts.profile_form[0].default
    assert made("facebook", fields="id,name").profile_query(make_info())["fields"] == "id,name"


def test_a_wrong_value_of_a_providers_own_key_fails_init_app_with_the_others() -> None:
    app = Flask("own")
    app.config.update(
        SECRET_KEY="k",
        SOCIAL_OAUTH2_PROVIDERS={
            "apple": valid_block(redirectURL="/authenticate/apple", customProperties={}),
            "facebook": valid_block(
                redirectURL="/authenticate/facebook",
                customProperties={"appsecretProof": "yes", "dpop": "no"},
            ),
        },
    )
    with pytest.raises(ConfigurationError) as raised:
        SocialOAuth2(app)
    found = {(problem.provider, problem.key) for problem in raised.value.problems}
    assert {
        ("apple", "customProperties.teamID"),
        ("apple", "customProperties.keyID"),
        ("facebook", "customProperties.appsecretProof"),
        ("facebook", "customProperties.dpop"),
    } <= found


def make_info() -> Any:
    from flask_social_oauth2 import OAuth2Info

    return OAuth2Info(access_token="a", params={"user_id": "1"})
