"""A whole sign-in with a built-in provider against recorded answers on loopback.

The app's own route starts the flow and takes the callback; the token endpoint and the
profile address are a real HTTP server on loopback (:mod:`fault_server`) that serves the
provider's recorded answers (``tests/fixtures/providers``) and records every request.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import query_of, sign_in

from flask_social_oauth2 import OAuth2Info, SocialOAuth2, SocialProfile
from flask_social_oauth2.providers.oauth2 import OAuth2Provider, SocialProvider

FIXTURES: Final = Path(__file__).parent / "fixtures" / "providers"
CLIENT_ID: Final = "provider-test-client"
CLIENT_SECRET: Final = "provider-test-secret-Zq8wX"
ACCESS_TOKEN: Final = "provider-test-access-token-7HkPq"
CODE: Final = "provider-test-code-Lm3Nb"
PROFILE_FIELDS: Final = (
    "provider_key",
    "username",
    "first_name",
    "last_name",
    "full_name",
    "email",
    "email_verified",
    "avatar_url",
)
#: The token answer of a provider without a recorded one.
PLAIN_TOKEN: Final = MappingProxyType({"access_token": ACCESS_TOKEN, "token_type": "Bearer"})


def fixture(name: str) -> Any:
    """A recorded answer's JSON."""
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def has_fixture(name: str) -> bool:
    return (FIXTURES / f"{name}.json").is_file()


def trimmed(data: Any, paths: tuple[str, ...]) -> Any:
    """A copy of ``data`` without the values at the dotted ``paths``."""
    copied = copy.deepcopy(data)
    for path in paths:
        *parents, last = path.split(".")
        node = copied
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.get(part)
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(last, None)
    return copied


def expect(
    key: str,
    *,
    username: str | None = None,
    first: str | None = None,
    last: str | None = None,
    full: str | None = None,
    email: str | None = None,
    verified: bool | None = None,
    avatar: str | None = None,
) -> Mapping[str, str | bool | None]:
    """The profile fields a sign-in must give."""
    values = (key, username, first, last, full, email, verified, avatar)
    return MappingProxyType(dict(zip(PROFILE_FIELDS, values, strict=True)))


def values_of(profile: SocialProfile) -> dict[str, str | bool | None]:
    return {name: getattr(profile, name) for name in PROFILE_FIELDS}


@dataclass(frozen=True)
class ProviderCase:
    """One built-in provider: where its answers are served and what the sign-in must give.

    :param api_path: Where the profile is served (``None``: no profile request is made).
    :param profile: The fixture of the profile answer (default: the provider's name).
    :param token: The fixture of the token answer (default ``<name>.token`` if recorded).
    :param block: Changes to the provider block (``apiURL: None`` leaves it out).
    :param trim: Paths removed from the profile for the "missing fields" run.
    :param token_trim: Paths removed from the token answer for that run.
    :param extra: Further answers (path -> fixture name) the provider asks for.
    :param scheme: The ``Authorization`` scheme of the profile request (``None``: no header).
    :param token_in_url: Whether the provider's API takes the token in the address.
    :param api_url_path: The block's ``apiURL`` path when it is not ``api_path`` (HubSpot
        adds the token to it).
    :param read_alone: Whether the provider's answers are also read outside a sign-in, through
        ``exchange_code`` and ``retrieve_profile`` (test_builtin_providers.py).
    """

    api_path: str | None
    expected: Mapping[str, str | bool | None]
    profile: str | None = None
    token: str | None = None
    block: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    trim: tuple[str, ...] = ()
    token_trim: tuple[str, ...] = ()
    extra: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    scheme: str | None = "Bearer"
    token_in_url: bool = False
    api_url_path: str | None = None
    read_alone: bool = False

    @property
    def profile_path(self) -> str:
        """``api_path`` of a provider that has a profile request."""
        assert self.api_path is not None
        return self.api_path


@dataclass
class Outcome:
    """What a sign-in through the app's route gave."""

    status: int
    authorization_query: dict[str, str]
    profile: SocialProfile | None = None
    info: OAuth2Info | None = None
    error: Exception | None = None


def block_for(
    server: FaultServer, name: str, api_path: str | None, **changes: Any
) -> dict[str, Any]:
    """A provider block whose endpoints are on the loopback server (a ``None`` change leaves
    the key out)."""
    block: dict[str, Any] = {
        "authorizationURL": f"{server.url}/authorize",
        "accessTokenURL": f"{server.url}/token",
        "redirectURL": f"/authenticate/{name}",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
    }
    if api_path is not None:
        block["apiURL"] = f"{server.url}{api_path}"
    block.update(changes)
    return {key: value for key, value in block.items() if value is not None}


def provider_block(server: FaultServer, name: str, case: ProviderCase) -> dict[str, Any]:
    """The block of ``case``: its profile address and block changes on the loopback server."""
    return block_for(server, name, case.api_url_path or case.api_path, **case.block)


def make_app(
    providers: Mapping[str, Mapping[str, Any]],
    *,
    provider_classes: Mapping[str, type[OAuth2Provider]] | None = None,
    **config: Any,
) -> tuple[Flask, SocialOAuth2]:
    """An app with the extension set up for ``providers``."""
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="test-providers-secret-key",
        TESTING=True,
        TRUSTED_HOSTS=["localhost", "127.0.0.1"],
        SOCIAL_OAUTH2_PROVIDERS={name: dict(block) for name, block in providers.items()},
        SOCIAL_OAUTH2_TIMEOUT=5,
    )
    app.config.update(config)
    return app, SocialOAuth2(app, provider_classes=provider_classes)


def route_sign_in(
    server: FaultServer,
    name: str,
    block: Mapping[str, Any],
    *,
    callback: Mapping[str, str] | None = None,
    on_start: Callable[[Mapping[str, str]], None] | None = None,
) -> Outcome:
    """Start a sign-in with the app's route and come back with a code, as the provider would
    (the answers must already be set on ``server``).

    :param on_start: Called with the authorization request's query before the callback.
    """
    app, social = make_app({name: block})
    seen: dict[str, Any] = {}

    @social.on_authenticated
    def done(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> str:
        seen.update(info=info, profile=profile)
        return "signed in"

    @social.on_error
    def failed(provider_name: str, error: Exception) -> tuple[str, int]:
        seen["error"] = error
        return "failed", getattr(error, "status_code", 500)

    query: dict[str, str] = {}

    def started(location: str) -> None:
        assert location.startswith(str(block["authorizationURL"]))
        query.update(query_of(location))
        if on_start is not None:
            on_start(query)

    answer = sign_in(app.test_client(), name, code=CODE, callback=callback, on_start=started)
    return Outcome(
        status=answer.status_code,
        authorization_query=query,
        profile=seen.get("profile"),
        info=seen.get("info"),
        error=seen.get("error"),
    )


def serve_and_sign_in(
    server: FaultServer,
    name: str,
    case: ProviderCase,
    *,
    profile: Any = None,
    token: Any = None,
    adjust_token: Callable[[Any], Any] | None = None,
) -> Outcome:
    """Serve ``profile`` and ``token`` (default: the recorded ones) and sign in."""
    if profile is None and case.api_path is not None:
        profile = fixture(case.profile or name)
    if token is None:
        token_name = case.token or f"{name}.token"
        token = fixture(token_name) if has_fixture(token_name) else dict(PLAIN_TOKEN)
    if adjust_token is not None:
        token = adjust_token(token)
    if case.api_path is not None:
        server.set(case.api_path.split("?")[0], Behaviour.json(profile))
    server.set("/token", Behaviour.json(token))
    return route_sign_in(server, name, provider_block(server, name, case))
