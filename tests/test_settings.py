"""OAuth2Settings, OAuth2Info and SocialProfile."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from helpers import CLIENT_SECRET, valid_block

from flask_social_oauth2 import OAuth2Info, OAuth2Settings, SocialProfile
from flask_social_oauth2.config.settings import CONFIG_KEYS, REQUIRED_KEYS
from flask_social_oauth2.errors import ConfigurationError


def problems_of(block: Any) -> list[str]:
    with pytest.raises(ConfigurationError) as caught:
        OAuth2Settings.from_config(block, provider="example")
    return [str(problem) for problem in caught.value.problems]


def test_config_keys_are_the_specifications() -> None:
    assert list(CONFIG_KEYS) == [
        "authorizationURL",
        "accessTokenURL",
        "redirectURL",
        "apiURL",
        "clientID",
        "clientSecret",
        "scope",
        "authorizationParams",
        "accessTokenParams",
        "customProperties",
    ]


def test_from_config_reads_every_field() -> None:
    block = valid_block(
        authorizationParams={"prompt": "consent"},
        accessTokenParams={"audience": "api"},
        customProperties={"userAgent": "x"},
    )
    settings = OAuth2Settings.from_config(block, provider="example")
    assert settings.authorization_url == "https://provider.example/authorize"
    assert settings.access_token_url == "https://provider.example/token"
    assert settings.redirect_url == "/authenticate/example"
    assert settings.api_url == "https://provider.example/userinfo"
    assert settings.client_id == "test-client"
    assert settings.client_secret == CLIENT_SECRET
    assert settings.scope == "openid profile email"
    assert dict(settings.authorization_params) == {"prompt": "consent"}
    assert dict(settings.access_token_params) == {"audience": "api"}
    assert dict(settings.custom_properties) == {"userAgent": "x"}


def test_to_config_round_trips() -> None:
    block = valid_block(authorizationParams={"prompt": "consent"})
    settings = OAuth2Settings.from_config(block)
    assert settings.to_config() == block
    assert OAuth2Settings.from_config(settings.to_config()) == settings


def test_only_the_four_required_keys_make_a_valid_block() -> None:
    block = {key: valid_block()[key] for key in REQUIRED_KEYS}
    settings = OAuth2Settings.from_config(block)
    assert settings.authorization_url is None
    assert settings.api_url is None
    assert settings.scope is None
    assert dict(settings.authorization_params) == {}


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_each_required_key_is_required(key: str) -> None:
    block = valid_block()
    del block[key]
    assert problems_of(block) == [f"provider 'example', key {key!r}: is required"]


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_required_keys_must_not_be_empty(key: str) -> None:
    assert problems_of(valid_block(**{key: "  "})) == [
        f"provider 'example', key {key!r}: must not be empty"
    ]


def test_every_problem_is_listed_at_once() -> None:
    block = {"clientId": "x", "scope": ["a", "b"], "accessTokenURL": "ftp://x"}
    problems = problems_of(block)
    assert len(problems) == 6, problems
    assert any("'clientId': is not a known key; did you mean 'clientID'?" in p for p in problems)
    assert any("'redirectURL': is required" in p for p in problems)
    assert any("'clientSecret': is required" in p for p in problems)
    assert any("'clientID': is required" in p for p in problems)
    assert any("'scope': must be a string, not a list" in p for p in problems)
    assert any("'accessTokenURL': must be an absolute http(s) URL" in p for p in problems)


@pytest.mark.parametrize(
    ("typo", "guess"),
    [
        ("clientId", "clientID"),
        ("client_id", "clientID"),
        ("ClientSecret", "clientSecret"),
        ("accessTokenUrl", "accessTokenURL"),
        ("redirect_url", "redirectURL"),
        ("scopes", "scope"),
        ("authorizationParam", "authorizationParams"),
    ],
)
def test_unknown_key_suggests_the_right_one(typo: str, guess: str) -> None:
    block = valid_block()
    block[typo] = "x"
    assert problems_of(block) == [
        f"provider 'example', key {typo!r}: is not a known key; did you mean {guess!r}?"
    ]


def test_unknown_key_far_from_any_lists_the_known_keys() -> None:
    block = valid_block(color="blue")
    (problem,) = problems_of(block)
    assert "known keys: authorizationURL, accessTokenURL" in problem


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("clientID", {"a": "b"}, "must be a string, not a map"),
        ("clientSecret", 12345, "must be a string, not a number"),
        ("scope", ["openid", "email"], "must be a string, not a list"),
        ("redirectURL", True, "must be a string, not a boolean"),
        (
            "authorizationParams",
            "prompt=consent",
            "must be a map of strings to strings, not a string",
        ),
        ("accessTokenParams", ["a"], "must be a map of strings to strings, not a list"),
        ("customProperties", {"retries": 3}, "entry 'retries' must map a string to a string"),
        ("authorizationParams", {"prompt": None}, "not to nothing (null)"),
    ],
)
def test_wrong_types_are_named(key: str, value: Any, message: str) -> None:
    (problem,) = problems_of(valid_block(**{key: value}))
    assert problem.startswith(f"provider 'example', key {key!r}: ")
    assert message in problem


@pytest.mark.parametrize("key", ["authorizationURL", "accessTokenURL", "apiURL"])
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("provider.example/token", "must be an absolute http(s) URL"),
        ("ftp://provider.example/token", "must be an absolute http(s) URL"),
        ("javascript:alert(1)", "must be an absolute http(s) URL"),
        ("https:///token", "has no host"),
        ("https://user:pw@provider.example/token", "must not contain user credentials"),
        ("https://provider.example/token#x", "must not contain a fragment"),
        ("https://provider.example:99999/token", "is not a valid URL"),
        ("https://provider.example/to ken", "must not contain spaces"),
        ("http://provider.example/token", "must use https"),
        ("http://localhost:80@attacker.test/", "must not contain user credentials"),
        ("http://127.0.0.1.attacker.test/token", "must use https"),
        ("http://localhost.attacker.test/token", "must use https"),
        ("http://[::2]/token", "must use https"),
        ("http://10.0.0.1/token", "must use https"),
    ],
)
def test_bad_endpoint_urls_are_refused(key: str, url: str, message: str) -> None:
    (problem,) = problems_of(valid_block(**{key: url}))
    assert f"key {key!r}: {message}" in problem


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost/token",
        "http://localhost:8080/token",
        "http://127.0.0.1:5000/token",
        "http://127.1.2.3/token",
        "http://[::1]:5000/token",
        "http://[::ffff:127.0.0.1]/token",
        "https://provider.example/token?audience=x",
    ],
)
def test_loopback_http_and_https_endpoints_are_accepted(url: str) -> None:
    settings = OAuth2Settings.from_config(valid_block(accessTokenURL=url, apiURL=url))
    assert settings.access_token_url == url


@pytest.mark.parametrize(
    "url",
    [
        "/authenticate/example",
        "https://app.example/authenticate/example",
        "http://app.example/authenticate/example",
    ],
)
def test_redirect_url_is_absolute_or_a_path(url: str) -> None:
    assert OAuth2Settings.from_config(valid_block(redirectURL=url)).redirect_url == url


@pytest.mark.parametrize(
    "url", ["authenticate/example", "//evil.example/x", "/\\evil", "mailto:x@y", "/a b"]
)
def test_bad_redirect_urls_are_refused(url: str) -> None:
    (problem,) = problems_of(valid_block(redirectURL=url))
    assert "key 'redirectURL'" in problem


@pytest.mark.parametrize(
    ("key", "param"),
    [
        ("authorizationParams", "state"),
        ("authorizationParams", "redirect_uri"),
        ("authorizationParams", "code_challenge_method"),
        ("accessTokenParams", "code_verifier"),
        ("accessTokenParams", "client_secret"),
    ],
)
def test_params_may_not_override_the_flow(key: str, param: str) -> None:
    (problem,) = problems_of(valid_block(**{key: {param: "x"}}))
    assert f"must not set {param!r}: the flow sets it" in problem


def test_empty_optional_strings_count_as_absent() -> None:
    settings = OAuth2Settings.from_config(valid_block(authorizationURL="", apiURL="", scope=""))
    assert (settings.authorization_url, settings.api_url, settings.scope) == (None, None, None)


def test_a_block_must_be_a_map() -> None:
    assert problems_of(["a"]) == ["provider 'example': must be a map of settings, not a list"]


def test_settings_are_immutable_and_mappings_read_only() -> None:
    settings = OAuth2Settings.from_config(valid_block(customProperties={"a": "b"}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.scope = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.custom_properties["a"] = "c"  # type: ignore[index]


def test_mappings_are_copied_from_the_caller() -> None:
    params = {"prompt": "consent"}
    settings = OAuth2Settings.from_config(valid_block(authorizationParams=params))
    params["prompt"] = "none"
    assert settings.authorization_params["prompt"] == "consent"


def test_repr_and_str_never_show_the_secret() -> None:
    settings = OAuth2Settings.from_config(
        valid_block(customProperties={"appSecretKey": "hidden-value", "userAgent": "ua"})
    )
    for text in (repr(settings), str(settings), f"{settings}"):
        assert CLIENT_SECRET not in text
        assert "hidden-value" not in text
        assert "client_secret='***'" in text
        assert "'userAgent': 'ua'" in text


def test_replace_changes_only_the_given_fields() -> None:
    settings = OAuth2Settings.from_config(valid_block())
    changed = settings.replace(scope="repo", authorization_params={"prompt": "login"})
    assert changed.scope == "repo"
    assert dict(changed.authorization_params) == {"prompt": "login"}
    assert changed.client_id == settings.client_id
    assert settings.scope == "openid profile email"


def test_replace_validates() -> None:
    settings = OAuth2Settings.from_config(valid_block())
    with pytest.raises(ConfigurationError, match="'accessTokenURL': must use https"):
        settings.replace(access_token_url="http://provider.example/token")


def test_replace_refuses_unknown_names() -> None:
    settings = OAuth2Settings.from_config(valid_block())
    with pytest.raises(TypeError, match="scopes"):
        settings.replace(scopes="x")  # type: ignore[call-arg]


def test_direct_construction_validates() -> None:
    with pytest.raises(ConfigurationError, match="redirectURL"):
        OAuth2Settings(
            access_token_url="https://p.example/t",
            redirect_url="nowhere",
            client_id="a",
            client_secret="b",
        )


def test_settings_are_hashable_and_comparable() -> None:
    one = OAuth2Settings.from_config(valid_block())
    two = OAuth2Settings.from_config(valid_block())
    assert one == two
    assert hash(one) == hash(two)
    assert one != one.replace(scope="x")


def test_oauth2_info_repr_hides_tokens() -> None:
    info = OAuth2Info(
        access_token="at-secret",
        token_type="Bearer",
        expires_in=3600,
        refresh_token="rt-secret",
        params={"id_token": "idt-secret", "scope": "openid"},
    )
    text = repr(info)
    assert "at-secret" not in text
    assert "rt-secret" not in text
    assert "idt-secret" not in text
    assert "params=<id_token, scope>" in text
    with pytest.raises(TypeError):
        info.params["x"] = 1  # type: ignore[index]


def test_social_profile_session_round_trip() -> None:
    profile = SocialProfile(
        provider_id="github", provider_key="42", full_name="Ada", raw={"id": 42}
    )
    data = profile.to_dict()
    assert "raw" not in data
    assert SocialProfile.from_dict(data) == profile


def test_social_profile_session_round_trip_keeps_every_field() -> None:
    profile = SocialProfile(
        provider_id="github",
        provider_key="42",
        username="ada",
        first_name="Ada",
        last_name="Lovelace",
        full_name="Ada King",
        email="ada@example.com",
        email_verified=False,
        avatar_url="https://img.example/ada.png",
    )
    data = profile.to_dict()
    assert data["username"] == "ada"
    assert data["email_verified"] is False
    assert SocialProfile.from_dict(data) == profile


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        " javascript:alert(1)",
        "data:image/svg+xml;base64,PHN2Zz4=",
        "avatar/athlete/large.png",
        "/avatars/1.png",
        "//evil.example/a.png",
        "https:evil.example/a.png",
        "https://",
        "ftp://files.example/a.png",
        "https://img.example/a b.png",
        "https://img.example/a.png\n",
        "https://user:pw@img.example/a.png",
        "",
    ],
)
def test_social_profile_drops_an_avatar_that_is_not_http(url: str) -> None:
    profile = SocialProfile(provider_id="p", provider_key="1", avatar_url=url)
    assert profile.avatar_url is None
    assert SocialProfile.from_dict({**profile.to_dict(), "avatar_url": url}).avatar_url is None


@pytest.mark.parametrize(
    "url", ["https://img.example/a.png?s=96&d=x", "http://127.0.0.1:5000/a.svg", "HTTPS://IMG.EX/A"]
)
def test_social_profile_keeps_an_http_avatar(url: str) -> None:
    assert SocialProfile(provider_id="p", provider_key="1", avatar_url=url).avatar_url == url


def test_social_profile_full_name_is_the_display_name_else_first_and_last() -> None:
    joined = SocialProfile(provider_id="p", provider_key="1", first_name="Ada", last_name="L")
    assert joined.full_name == "Ada L"
    only_last = SocialProfile(provider_id="p", provider_key="1", last_name="Lovelace")
    assert only_last.full_name == "Lovelace"
    display = SocialProfile(provider_id="p", provider_key="1", first_name="A", full_name="Ada")
    assert display.full_name == "Ada"
    handle_only = SocialProfile(provider_id="p", provider_key="1", username="ada")
    assert handle_only.full_name is None


@pytest.mark.parametrize(
    ("email", "verified", "expected"),
    [
        ("a@example.com", True, True),
        ("a@example.com", False, False),
        ("a@example.com", None, None),
        ("a@example.com", "true", None),  # a profile holds booleans; mapping reads strings
        (None, True, None),  # no address: nothing is verified
    ],
)
def test_social_profile_email_verified(email: str | None, verified: Any, expected: Any) -> None:
    profile = SocialProfile(provider_id="p", provider_key="1", email=email, email_verified=verified)
    assert profile.email_verified is expected


@pytest.mark.parametrize(
    "url",
    ["https://user:hunter2@api.example/me", "http://api.example/me?key=APIKEY123"],
)
def test_url_errors_never_echo_credentials_or_query(url: str) -> None:
    (problem,) = problems_of(valid_block(apiURL=url))
    assert "hunter2" not in problem
    assert "APIKEY123" not in problem
    assert "api.example/me" in problem


def test_repr_masks_secret_looking_entries_of_every_map() -> None:
    settings = OAuth2Settings.from_config(
        valid_block(
            accessTokenParams={"client_assertion": "JWT-SECRET", "audience": "api"},
            authorizationParams={"login_hint": "ada", "api_key": "K-SECRET"},
        )
    )
    text = repr(settings)
    assert "JWT-SECRET" not in text
    assert "K-SECRET" not in text
    assert "'audience': 'api'" in text
    assert "'login_hint': 'ada'" in text


def test_equal_settings_hash_equal_whatever_the_map_order() -> None:
    one = OAuth2Settings.from_config(valid_block(customProperties={"a": "1", "b": "2"}))
    two = OAuth2Settings.from_config(valid_block(customProperties={"b": "2", "a": "1"}))
    assert one == two
    assert hash(one) == hash(two)
