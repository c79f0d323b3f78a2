"""No object of the package shows a secret in ``repr`` or ``str`` (SECURITY.md 28).

The walk finds every class of the package that has a field, slot or constructor parameter named
like a secret (a token, code, verifier, nonce, state, secret, password, key or answer body), and
every such class must have a factory below: a new class that holds a secret cannot be forgotten.
Each factory builds an object holding known secret values; none may appear in its ``repr`` or
``str``. Objects that hold secrets under other names (the stores, the signing keys, the
extension, the providers) are built and checked too.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest
from flask import Flask
from helpers import ALICE, CLIENT_ID, MakeApp, valid_block

import flask_social_oauth2
from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.api import ProviderSession
from flask_social_oauth2.config.settings import OAuth2Info, OAuth2Settings
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.local_idp.apple import CheckedSecret
from flask_social_oauth2.local_idp.clock import ManualClock
from flask_social_oauth2.local_idp.models import (
    AuthorizationCode,
    Client,
    IssuedToken,
    TokenResponse,
)
from flask_social_oauth2.local_idp.server import LocalAuthorizationServer
from flask_social_oauth2.oauth.dpop import DPoPKey, KeyCache
from flask_social_oauth2.oauth.provider_response import ProviderResponse
from flask_social_oauth2.providers.apple_secret import _Made
from flask_social_oauth2.providers.facebook import FacebookOptions
from flask_social_oauth2.providers.oauth2 import OAuth2Provider, SocialProvider
from flask_social_oauth2.tokens import SessionTokenStore
from flask_social_oauth2.tokens.cipher import TokenCipher
from flask_social_oauth2.tokens.sql import SQLAlchemyTokenStore
from flask_social_oauth2.web.callback import Callback
from flask_social_oauth2.web.form_post import FormPost
from flask_social_oauth2.web.id_token_sign_in import IssuedNonce, OneTap
from flask_social_oauth2.web.state_cookie import PendingFlow, StateSerializer

SECRET: Final = "s3cr3t-9c1d4e"
CODE: Final = "code-7a2b9f"
VERIFIER: Final = "verifier-3e8d1c"
STATE: Final = "state-5f0a6b"
NONCE: Final = "nonce-8b4c2d"
ACCESS: Final = "access-1d9e7f"
REFRESH: Final = "refresh-6c3a0e"
ID_TOKEN: Final = "idtoken-2f5b8a"
FERNET_KEY: Final = base64.urlsafe_b64encode(b"k" * 32).decode()
SECRETS: Final = (SECRET, CODE, VERIFIER, STATE, NONCE, ACCESS, REFRESH, ID_TOKEN, FERNET_KEY)

#: A field, slot or parameter whose name says it holds a secret.
SECRET_NAME: Final = re.compile(
    r"secret|password|verifier|nonce|private|assertion|credential|tokens?$"
    r"|(^|_)(code|state|body|keys?)$"
)
#: Names that look secret and are not, per class.
NOT_SECRET: Final[dict[tuple[str, str], str]] = {
    ("AuthenticationError", "status_code"): "an HTTP status",
    ("ProviderRefusedError", "error_code"): "the provider's error code, cut to a safe charset",
    ("ConfigurationProblem", "key"): "the name of a configuration key",
    ("PropertyRule", "key"): "the name of a customProperties entry",
    ("ProviderFacts", "code"): "whether the provider has code of its own",
    ("_Failure", "status_code"): "an HTTP status",
    ("RecordedTokenRequest", "status_code"): "an HTTP status",
    ("LocalIdentityProvider", "issue_refresh_tokens"): "a switch",
    ("Store", "refresh_tokens"): "a switch (the tokens are checked through the factory)",
    ("Client", "refresh_tokens"): "a switch",
    ("OAuth2Info", "token_type"): "a token type such as Bearer",
    ("Runtime", "session_key"): "the name of the session key the profile is kept under",
    ("Options", "session_key"): "the name of the session key the profile is kept under",
    ("ProfileFields", "provider_key"): "where the user id is found in a profile",
    ("SocialProfile", "provider_key"): "the user's id at the provider, not a secret",
    ("Identity", "provider_key"): "the user's id at the provider, not a secret",
    ("ProviderFacts", "profile_json_body"): "a switch",
    ("ProviderFacts", "init_client_secret"): "the ${VARIABLE} `flask social init` writes",
    ("SessionTokenStore", "session_key"): "the name of the session key the tokens are under",
}


def package_classes() -> Iterator[type]:
    for module_info in pkgutil.walk_packages(
        flask_social_oauth2.__path__, f"{flask_social_oauth2.__name__}."
    ):
        if module_info.name.endswith("__main__"):
            continue  # running it is the local IdP's command line
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                yield value


def field_names(cls: type) -> set[str]:
    names: set[str] = set()
    if dataclasses.is_dataclass(cls):
        names |= {item.name for item in dataclasses.fields(cls)}
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__", ())
        names |= {slots} if isinstance(slots, str) else set(slots)
    with contextlib.suppress(TypeError, ValueError):  # a C-level __init__
        names |= set(inspect.signature(vars(cls).get("__init__", object.__init__)).parameters) - {
            "self",
            "args",
            "kwargs",
        }
    return {name.lstrip("_") for name in names}


def secret_fields(cls: type) -> set[str]:
    own = {name for name in field_names(cls) if SECRET_NAME.search(name)}
    ignored = {
        name
        for name in own
        for klass in cls.__mro__
        if (klass.__name__, name) in NOT_SECRET
        or name.endswith(("_ttl", "_url", "_endpoint", "_params", "_uri", "_scheme"))
    }
    return own - ignored


# -- factories: each builds an object that holds the secrets above ---------------------------------

CLOCK: Final = ManualClock()


def settings() -> OAuth2Settings:
    return OAuth2Settings.from_config(valid_block(clientSecret=SECRET))


def info() -> OAuth2Info:
    return OAuth2Info(
        access_token=ACCESS,
        token_type="Bearer",
        expires_in=60,
        refresh_token=REFRESH,
        params={"id_token": ID_TOKEN, "scope": "openid"},
        id_token_claims={"sub": "u-1", "nonce": NONCE},
    )


def token_answer() -> ProviderResponse:
    body = f'{{"access_token": "{ACCESS}", "refresh_token": "{REFRESH}"}}'.encode()
    return ProviderResponse(200, "application/json", body, {"Set-Cookie": f"s={SECRET}"})


def pending_flow() -> PendingFlow:
    return PendingFlow(STATE, "github", "https://app.example/cb", VERIFIER, "/", 1, NONCE)


def local_client() -> Client:
    return Client(CLIENT_ID, SECRET, ("https://app.example/cb",), frozenset(), "openid", True)


def authorization_code() -> AuthorizationCode:
    return AuthorizationCode(
        CODE, CLIENT_ID, "https://app.example/cb", "openid", ALICE, "ch", "S256", NONCE, 0, 0.0,
        "g", CLOCK,
    )  # fmt: skip


def issued_token() -> IssuedToken:
    return IssuedToken(ACCESS, REFRESH, CLIENT_ID, ALICE, "openid", 60, 0.0, "g", CLOCK)


def local_idp() -> LocalIdentityProvider:
    idp = LocalIdentityProvider()
    idp.register_client(CLIENT_ID, SECRET, ["https://app.example/cb"])
    return idp


def local_store() -> Any:
    idp = local_idp()
    return idp.store


def provider(cls: type[SocialProvider] = OAuth2Provider) -> SocialProvider:
    return cls("example", settings())


def provider_session() -> ProviderSession:
    """A session for calling an API (its ``key`` is the identity's provider_key, no secret);
    it never holds the token, which is read from the store for each call."""
    app = Flask("repr_walk")
    app.config.update(SECRET_KEY=SECRET, SOCIAL_OAUTH2_PROVIDERS={"example": valid_block()})
    SocialOAuth2(app)
    with app.app_context():
        return ProviderSession(OAuth2Provider("example", settings()), "u-1", SessionTokenStore())


def loaded_cache(key: DPoPKey) -> KeyCache:
    """A cache of loaded DPoP keys holding ``key`` (``max_keys`` is a count, no secret)."""
    cache = KeyCache()
    cache.load(key.export())
    return cache


FACTORIES: Final[dict[type, Callable[[], object]]] = {
    OAuth2Settings: settings,
    OAuth2Info: info,
    ProviderResponse: token_answer,
    PendingFlow: pending_flow,
    StateSerializer: lambda: StateSerializer(SECRET),
    Client: local_client,
    AuthorizationCode: authorization_code,
    IssuedToken: issued_token,
    TokenResponse: lambda: TokenResponse(access_token=ACCESS, refresh_token=REFRESH),
    LocalAuthorizationServer: lambda: local_idp().authorization_server,
    FormPost: lambda: FormPost(STATE, CODE, None, None, '{"name": {}}', False),
    IssuedNonce: lambda: IssuedNonce("google", NONCE, 1, "/next"),
    OneTap: lambda: OneTap(CLIENT_ID, "https://app.example/authenticate/google", NONCE),
    Callback: lambda: Callback(STATE, CODE, "access_denied", None),
    CheckedSecret: lambda: CheckedSecret({"alg": "ES256"}, {"sub": CLIENT_ID}, None, SECRET),
    _Made: lambda: _Made(SECRET, 0.0),
    TokenCipher: lambda: TokenCipher([FERNET_KEY]),
    ProviderSession: provider_session,
    DPoPKey: DPoPKey.generate,  # its private value is random: see the test at the end
    KeyCache: lambda: loaded_cache(DPoPKey.generate()),  # the same
    FacebookOptions: lambda: FacebookOptions(appsecret_proof=True),  # a switch, no secret
}
#: Objects that hold secrets under names the walk does not catch.
MORE: Final[dict[str, Callable[[], object]]] = {
    "LocalIdentityProvider": local_idp,
    "Store": local_store,
    "SigningKeys": lambda: local_idp().keys,
    "provider": provider,
    "SQLAlchemyTokenStore": lambda: SQLAlchemyTokenStore(
        f"postgresql+psycopg://app:{SECRET}@db.example/social"
    ),
}


def test_every_class_holding_a_secret_has_a_factory() -> None:
    missing = {
        f"{cls.__module__}.{cls.__qualname__}: {sorted(secret_fields(cls))}"
        for cls in package_classes()
        if secret_fields(cls)
        and not any(issubclass(cls, known) for known in FACTORIES)
        and not issubclass(cls, Exception)
    }
    assert not missing, "add a factory to FACTORIES (and mask the repr) for:\n" + "\n".join(
        sorted(missing)
    )


def test_the_walk_finds_the_known_holders() -> None:
    """The walk is not empty by accident: it finds the classes named in SECURITY.md."""
    found = {cls for cls in package_classes() if secret_fields(cls)}
    assert {OAuth2Settings, OAuth2Info, ProviderResponse, PendingFlow, Client, IssuedToken} <= found


def shown(value: object) -> str:
    return f"{value!r}\n{value!s}"


@pytest.mark.parametrize(
    "build", [*FACTORIES.values(), *MORE.values()], ids=[*(c.__name__ for c in FACTORIES), *MORE]
)
def test_no_secret_in_repr_or_str(build: Callable[[], object]) -> None:
    text = shown(build())
    assert not [secret for secret in SECRETS if secret in text], text


def test_no_provider_class_shows_a_secret() -> None:
    classes = {
        cls
        for cls in package_classes()
        if issubclass(cls, OAuth2Provider) and not inspect.isabstract(cls)
    }
    assert OAuth2Provider in classes
    for cls in classes:
        text = shown(provider(cls))
        assert SECRET not in text, cls


def test_no_secret_in_the_extension_or_its_runtime(make_app: MakeApp) -> None:
    app: Flask = make_app({"example": valid_block(clientSecret=SECRET)}, SECRET_KEY=SECRET)
    state = app.extensions["social_oauth2"]
    objects = [state, *vars(state).values()] if hasattr(state, "__dict__") else [state]
    runtime = getattr(state, "runtime", None)
    if runtime is not None:
        objects += [runtime, *(getattr(runtime, f.name) for f in dataclasses.fields(runtime))]
    for value in objects:
        assert SECRET not in shown(value), type(value)


def test_no_private_key_in_the_local_identity_providers_objects() -> None:
    idp = local_idp()
    private = idp.keys.key.as_dict(private=True)["d"]
    assert isinstance(private, str)
    for value in (idp, idp.keys, idp.authorization_server, idp.store):
        assert private not in shown(value), type(value)


def test_no_private_key_in_a_dpop_key() -> None:
    key = DPoPKey.generate()
    private = json.loads(key.export())["d"]
    assert private not in shown(key) + shown([key]) + shown(loaded_cache(key))
