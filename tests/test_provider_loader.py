"""Providers loaded at runtime (one per customer): ``@social.provider_loader``,
``social.build_provider`` and ``social.forget_provider``, against two real OpenID Connect
servers on loopback standing for two customers."""

from __future__ import annotations

import gc
import logging
import threading
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from flask import Flask, current_app, session
from helpers import (
    ALICE,
    CLIENT_ID,
    CLIENT_SECRET,
    Clock,
    MakeApp,
    follow_to_provider,
    in_threads,
    sign_in,
    valid_block,
    watch,
)

from flask_social_oauth2 import OAuth2Provider, OAuth2Settings, SocialOAuth2, SocialProvider
from flask_social_oauth2.accounts import signed_in
from flask_social_oauth2.cli import social_cli
from flask_social_oauth2.errors import (
    ConfigurationError,
    ProviderUnavailableError,
    StateError,
    UnknownProviderError,
)
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.providers import BUILTIN_PROVIDERS
from flask_social_oauth2.runtime import current_runtime
from flask_social_oauth2.tokens import SQLAlchemyTokenStore
from flask_social_oauth2.web.loaded_providers import LoadedProviders

CUSTOMERS = ("acme", "globex")


def customer_server(name: str) -> LocalIdentityProvider:
    server = LocalIdentityProvider()
    server.start()
    server.register_client(CLIENT_ID, CLIENT_SECRET, [f"http://localhost/authenticate/{name}"])
    server.auto_approve = ALICE
    return server


@pytest.fixture
def customers() -> Iterator[dict[str, LocalIdentityProvider]]:
    """Two customers' identity providers, each a real OpenID Connect server on loopback;
    both know Alice, with the same ``sub``."""
    servers = {name: customer_server(name) for name in CUSTOMERS}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def customer_block(server: LocalIdentityProvider, name: str, **changes: Any) -> dict[str, Any]:
    block: dict[str, Any] = server.settings_block(CLIENT_ID, CLIENT_SECRET, f"/authenticate/{name}")
    # The issuer: its discovery document is read and every ID token verified.
    block["customProperties"] = {"issuer": server.issuer, "revocationURL": server.revocation_url}
    block.update(changes)
    return block


class Tenants:
    """The app's table of customers' blocks (a dict here) and the loader over it, which counts
    its calls by name."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.blocks: dict[str, Any] = {}
        self.calls: list[str] = []
        self.social: SocialOAuth2 = app.extensions["social_oauth2"].extension
        self.social.provider_loader(self.load)

    def load(self, name: str) -> SocialProvider | None:
        self.calls.append(name)
        block = self.blocks.get(name)
        if block is None:
            return None
        return self.social.build_provider(name, block)


def tenant_app(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider], **config: Any
) -> tuple[Flask, Tenants]:
    app = make_app({}, **config)
    tenants = Tenants(app)
    for name, server in customers.items():
        tenants.blocks[name] = customer_block(server, name)
    return app, tenants


# -- signing in through loaded providers ----------------------------------------------------------


def test_customers_loaded_at_runtime_sign_in_through_their_own_servers(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    app, tenants = tenant_app(make_app, customers)
    outcome = watch(app)
    client = app.test_client()
    for name in CUSTOMERS:
        assert sign_in(client, name).status_code == 302
    assert [p.provider_key for p in outcome.profiles] == [ALICE.sub, ALICE.sub]
    issuers = [(info.id_token_claims or {}).get("iss") for info in outcome.infos]
    assert issuers == [customers[name].issuer for name in CUSTOMERS]  # verified ID tokens
    for server in customers.values():
        assert server.discovery_requests == 1
        assert server.jwks_requests == 1
    for server in customers.values():
        assert len(server.token_requests) == 1
    with client.session_transaction() as browser:
        assert set(browser["social_oauth2_identities"]) == set(CUSTOMERS)
    assert tenants.calls == ["acme", "globex"]  # each asked once: the callback used the cache
    with app.app_context():
        assert dict(tenants.social.providers) == {}
        assert tenants.social.provider("acme").settings.access_token_url == (
            customers["acme"].token_url
        )


def test_the_sql_store_keeps_tenants_identities_apart_and_everything_works_for_them(
    make_app: MakeApp,
    customers: dict[str, LocalIdentityProvider],
    sql_store: SQLAlchemyTokenStore,
) -> None:
    app, tenants = tenant_app(make_app, customers, SOCIAL_OAUTH2_TOKEN_STORE=sql_store)
    social = tenants.social
    users = {"acme": "user-acme", "globex": "user-globex"}

    @social.on_authenticated
    def linked(provider: SocialProvider, info: Any, profile: Any) -> Any:
        social.link(users[provider.name])
        return {"ok": True}

    @app.get("/api/<name>")
    def call_api(name: str) -> Any:
        server = customers[name]
        return {"status": social.api(name).get(server.userinfo_url).status_code}

    @app.post("/sign-out")
    def sign_out() -> Any:
        social.sign_out(revoke=True)
        return {"signed_out": True}

    client = app.test_client()
    for name in CUSTOMERS:
        assert sign_in(client, name).status_code == 200
    with app.app_context():
        for name in CUSTOMERS:  # one sub, two customers: two identities, two users
            identity = social.identity(name, ALICE.sub)
            assert identity is not None
            assert (identity.provider, identity.user_id) == (name, users[name])
            assert [i.provider for i in social.identities(users[name])] == [name]
    for name in CUSTOMERS:
        assert client.get(f"/api/{name}").json == {"status": 200}
        assert len(customers[name].userinfo_requests) == 2  # the sign-in's and the API call's
    assert client.post("/sign-out").json == {"signed_out": True}
    for name in CUSTOMERS:
        assert len(customers[name].revocation_requests) == 1
    with sql_store.engine.connect() as connection:
        assert list(connection.execute(sa.select(sql_store.table))) == []


# -- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/authenticate/Acme",
        "/authenticate/ACME",
        "/authenticate/a..b",
        "/authenticate/..",
        "/authenticate/a%2Fb",
        "/authenticate/a/b",
        "/authenticate/" + "a" * 64,
        "/authenticate/" + "a" * 200,
        "/authenticate/-acme",
        "/authenticate/acme%00",
        "/authenticate/acme%20",
    ],
)
def test_a_malformed_name_is_the_unknown_provider_page_without_asking_the_loader(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider], path: str
) -> None:
    app, tenants = tenant_app(make_app, customers)
    tenants.blocks["a..b"] = tenants.blocks["Acme"] = tenants.blocks["acme"]
    assert app.test_client().get(path).status_code == 404
    with app.test_request_context():
        name = path.removeprefix("/authenticate/")
        with pytest.raises(UnknownProviderError):
            tenants.social.provider(name)
    assert tenants.calls == []


def test_the_longest_name_reaches_the_loader(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    app, tenants = tenant_app(make_app, customers)
    name = "a" * 63
    assert app.test_client().get(f"/authenticate/{name}").status_code == 404
    assert tenants.calls == [name]


def test_a_configured_name_always_wins_and_never_reaches_the_loader(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    configured = customer_block(customers["acme"], "acme")
    app = make_app({"acme": configured})
    tenants = Tenants(app)
    tenants.blocks["acme"] = customer_block(customers["globex"], "acme")
    assert sign_in(app.test_client(), "acme").status_code == 302
    assert len(customers["acme"].token_requests) == 1
    assert customers["globex"].authorization_requests == []
    assert tenants.calls == []
    with app.test_request_context(), pytest.raises(ConfigurationError) as refused:
        tenants.social.build_provider("acme", tenants.blocks["acme"])
    assert "provider 'acme': is a configured provider" in str(refused.value)


def test_an_unknown_name_is_a_404_and_the_answer_is_kept(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    app, tenants = tenant_app(make_app, customers)
    client = app.test_client()
    assert client.get("/authenticate/initech").status_code == 404
    assert client.get("/authenticate/initech").status_code == 404
    assert tenants.calls == ["initech"]


# -- a loader that fails --------------------------------------------------------------------------


def test_a_loader_that_raises_is_a_503_logged_and_not_kept(
    make_app: MakeApp,
    customers: dict[str, LocalIdentityProvider],
    captured_logs: list[logging.LogRecord],
) -> None:
    app, tenants = tenant_app(make_app, customers)
    calls: list[str] = []

    @tenants.social.provider_loader
    def broken(name: str) -> SocialProvider | None:
        calls.append(name)
        raise OSError("the tenants database is down")

    client = app.test_client()
    for _ in range(2):
        response = client.get("/authenticate/acme")
        assert response.status_code == 503
        assert "not available right now" in response.text
        assert "database" not in response.text
    assert calls == ["acme", "acme"]  # nothing kept
    logged = [r.getMessage() for r in captured_logs if r.levelno >= logging.ERROR]
    assert any("test_provider_loader" in text and "broken" in text for text in logged)
    failing = [r for r in captured_logs if r.exc_info]
    assert "the tenants database is down" in str(failing[0].exc_info[1])  # type: ignore[index]
    with app.test_request_context(), pytest.raises(ProviderUnavailableError) as raised:
        tenants.social.provider("acme")
    assert raised.value.status_code == 503
    assert "broken failed: OSError" in str(raised.value)


def test_a_block_that_does_not_validate_is_a_503_listing_every_problem_in_the_log(
    make_app: MakeApp,
    customers: dict[str, LocalIdentityProvider],
    captured_logs: list[logging.LogRecord],
) -> None:
    app, tenants = tenant_app(make_app, customers)
    bad = customer_block(customers["acme"], "acme", accessTokenURL="http://idp.example/token")
    del bad["clientSecret"]
    bad["clientSecrte"] = "a-customer-secret-value"
    tenants.blocks["acme"] = bad
    client = app.test_client()
    assert client.get("/authenticate/acme").status_code == 503
    assert client.get("/authenticate/acme").status_code == 503
    assert tenants.calls == ["acme", "acme"]
    logged = "\n".join(r.getMessage() for r in captured_logs)
    assert "key 'accessTokenURL'" in logged
    assert "key 'clientSecrte'" in logged
    assert "key 'clientSecret': is required" in logged
    assert "a-customer-secret-value" not in logged
    assert customers["acme"].authorization_requests == []


@pytest.mark.parametrize("answer", ["a string", {"clientID": "x"}, 42, OAuth2Provider])
def test_a_loader_returning_something_else_is_a_503_naming_the_loader(
    make_app: MakeApp,
    customers: dict[str, LocalIdentityProvider],
    captured_logs: list[logging.LogRecord],
    answer: object,
) -> None:
    app, tenants = tenant_app(make_app, customers)

    @tenants.social.provider_loader
    def sloppy_loader(name: str) -> Any:
        return answer

    assert app.test_client().get("/authenticate/acme").status_code == 503
    logged = [r.getMessage() for r in captured_logs if r.levelno >= logging.ERROR]
    assert any(
        "test_provider_loader" in text and "sloppy_loader" in text and "SocialProvider" in text
        for text in logged
    ), logged


def test_a_loader_returning_another_names_provider_is_a_503(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    app, tenants = tenant_app(make_app, customers)

    @tenants.social.provider_loader
    def mixed_up(name: str) -> SocialProvider | None:
        return tenants.social.build_provider("globex", tenants.blocks["globex"])

    assert app.test_client().get("/authenticate/acme").status_code == 503
    with app.test_request_context(), pytest.raises(ProviderUnavailableError, match="'globex'"):
        tenants.social.provider("acme")


# -- build_provider -------------------------------------------------------------------------------


def test_build_provider_lists_every_problem_of_a_customers_block(make_app: MakeApp) -> None:
    app = make_app({})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    block = valid_block(
        redirectURL="/authenticate/elsewhere",
        accessTokenURL="http://localhost:80@attacker.test/token",
        apiURL="http://idp.example/userinfo",
        clientSecret=None,
        colour="blue",
    )
    with app.test_request_context(), pytest.raises(ConfigurationError) as refused:
        social.build_provider("acme", block)
    text = str(refused.value)
    for expected in (
        "provider 'acme', key 'accessTokenURL'",
        "provider 'acme', key 'apiURL'",
        "provider 'acme', key 'clientSecret': is required",
        "provider 'acme', key 'colour'",
    ):
        assert expected in text
    good = valid_block(redirectURL="/authenticate/elsewhere")
    with app.test_request_context(), pytest.raises(ConfigurationError) as routed:
        social.build_provider("acme", good, kind="nosuch")
    text = str(routed.value)
    assert "provider 'acme', key 'redirectURL': path '/authenticate/elsewhere' routes to" in text
    assert "kind: 'nosuch' is not a built-in provider" in text
    assert "module:Class" not in text


def test_build_provider_checks_the_redirect_url_rule_as_init_app_does(make_app: MakeApp) -> None:
    block = valid_block(redirectURL="/somewhere/else")
    app = make_app({})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.test_request_context(), pytest.raises(ConfigurationError, match="routes to no GET"):
        social.build_provider("acme", block)
    unchecked = make_app({}, SOCIAL_OAUTH2_CHECK_REDIRECT_URLS=False)
    with unchecked.test_request_context():
        assert social.build_provider("acme", block).name == "acme"


def test_build_provider_takes_a_settings_record_and_a_kind(make_app: MakeApp) -> None:
    app = make_app({})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    settings = OAuth2Settings.from_config(valid_block(redirectURL="/authenticate/acme-gh"))
    with app.test_request_context():
        generic = social.build_provider("acme-gh", settings)
        github = social.build_provider("acme-gh", settings, kind="github")
        mine = social.build_provider("acme-gh", settings, kind=OAuth2Provider)
        assert type(generic) is OAuth2Provider
        assert type(github) is BUILTIN_PROVIDERS["github"]
        assert type(mine) is OAuth2Provider
        assert github.settings is settings
        with pytest.raises(ConfigurationError) as apple:
            social.build_provider("acme-gh", settings, kind="apple")  # the class's own checks
        assert "key 'customProperties.teamID': is required" in str(apple.value)
        for kind in ("os:system", dict):
            with pytest.raises(ConfigurationError, match="kind"):
                social.build_provider("acme-gh", settings, kind=kind)  # type: ignore[arg-type]
        for name in ("Acme", "a" * 64, "a/b", "a..b", ""):
            with pytest.raises(ConfigurationError, match="lower-case"):
                social.build_provider(name, settings)


def test_build_provider_does_not_read_the_apps_environment(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_SECRET_FOR_TEST", "the-apps-own-secret")
    app = make_app({})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    block = valid_block(
        redirectURL="/authenticate/acme", authorizationParams={"x": "${APP_SECRET_FOR_TEST}"}
    )
    with app.test_request_context():
        provider = social.build_provider("acme", block)
    assert provider.settings.authorization_params == {"x": "${APP_SECRET_FOR_TEST}"}


# -- the cache ------------------------------------------------------------------------------------


def test_the_cache_settings_are_read_once_and_checked(make_app: MakeApp) -> None:
    app = make_app({}, SOCIAL_OAUTH2_PROVIDER_CACHE_TTL=5, SOCIAL_OAUTH2_PROVIDER_CACHE_SIZE=7)
    loaded = app.extensions["social_oauth2"].loaded
    assert (loaded.ttl, loaded.size) == (5.0, 7)
    defaults = make_app({}).extensions["social_oauth2"].loaded
    assert (defaults.ttl, defaults.size) == (60.0, 1024)
    with pytest.raises(ConfigurationError) as refused:
        make_app({}, SOCIAL_OAUTH2_PROVIDER_CACHE_TTL=-1, SOCIAL_OAUTH2_PROVIDER_CACHE_SIZE=0)
    assert len(refused.value.problems) == 2
    assert "SOCIAL_OAUTH2_PROVIDER_CACHE_TTL" in str(refused.value)
    assert "SOCIAL_OAUTH2_PROVIDER_CACHE_SIZE" in str(refused.value)


class Counting:
    """A loader over fixed providers that counts its calls."""

    def __init__(self, known: dict[str, SocialProvider | None]) -> None:
        self.known = known
        self.calls: list[str] = []

    def __call__(self, name: str) -> SocialProvider | None:
        self.calls.append(name)
        return self.known.get(name)


def provider_named(name: str) -> SocialProvider:
    return OAuth2Provider(name, OAuth2Settings.from_config(valid_block()))


def test_answers_are_kept_for_the_ttl_then_asked_again() -> None:
    clock = Clock()
    loader = Counting({"acme": provider_named("acme")})
    loaded = LoadedProviders(lambda: loader, ttl=60, size=10, clock=clock)
    first = loaded.get("acme")
    assert loaded.get("acme") is first
    assert loaded.get("nobody") is None
    assert loaded.get("nobody") is None
    assert loader.calls == ["acme", "nobody"]
    clock.offset = 59.5
    assert loaded.get("acme") is first
    clock.offset = 60.5
    loader.known["acme"] = provider_named("acme")
    assert loaded.get("acme") is not first
    assert loader.calls == ["acme", "nobody", "acme"]
    loaded.forget("acme")
    loaded.get("acme")
    assert loader.calls[-1] == "acme"
    assert len(loader.calls) == 4


def test_the_cache_keeps_the_most_recently_used_names() -> None:
    loader = Counting({name: provider_named(name) for name in "abc"})
    loaded = LoadedProviders(lambda: loader, ttl=60, size=2)
    for name in "aba":
        loaded.get(name)
    loaded.get("c")  # drops b, the least recently used
    assert len(loaded) == 2
    loaded.get("a")
    assert loader.calls == ["a", "b", "c"]
    loaded.get("b")
    assert loader.calls == ["a", "b", "c", "b"]


def test_a_ttl_of_zero_keeps_nothing() -> None:
    loader = Counting({})
    loaded = LoadedProviders(lambda: loader, ttl=0, size=2)
    loaded.get("a")
    loaded.get("a")
    assert loader.calls == ["a", "a"]
    assert len(loaded) == 0


def test_one_extension_on_two_apps_shares_its_loader_and_each_app_keeps_its_answers(
    customers: dict[str, LocalIdentityProvider],
) -> None:
    social = SocialOAuth2()
    apps = []
    for number in range(2):
        app = Flask(f"app_{number}")
        app.config.update(SECRET_KEY="k", TRUSTED_HOSTS=["localhost"])
        social.init_app(app)
        apps.append(app)
    calls: list[tuple[str, str]] = []

    @social.provider_loader  # registered after init_app: every app sees it
    def tenant(name: str) -> SocialProvider | None:
        calls.append((current_app.name, name))
        return social.build_provider(name, customer_block(customers["acme"], name))

    for app in apps:
        assert app.test_client().get("/authenticate/acme").status_code == 302
        assert app.test_client().get("/authenticate/acme").status_code == 302
    assert calls == [("app_0", "acme"), ("app_1", "acme")]
    with apps[0].app_context():
        social.forget_provider("acme")
    for app in apps:
        assert app.test_client().get("/authenticate/acme").status_code == 302
    assert calls[2:] == [("app_0", "acme")]


def test_without_a_loader_nothing_is_loaded(make_app: MakeApp) -> None:
    app = make_app({})
    assert app.test_client().get("/authenticate/acme").status_code == 404
    with app.app_context():
        SocialOAuth2.forget_provider(app.extensions["social_oauth2"].extension, "acme")
        assert current_runtime().find_provider("acme") is None


def test_threads_asking_for_one_name_wait_for_a_single_call_of_the_loader() -> None:
    calls: list[str] = []
    gate = threading.Event()

    def slow(name: str) -> SocialProvider | None:
        calls.append(name)
        gate.wait(5)
        return provider_named(name)

    loaded = LoadedProviders(lambda: slow, ttl=60, size=100)
    found: list[SocialProvider | None] = []

    def ask(index: int) -> None:
        if index == 0:
            time.sleep(0.2)
            gate.set()
            return
        found.append(loaded.get(f"tenant-{index % 2}"))

    in_threads(ask, 9)
    assert sorted(calls) == ["tenant-0", "tenant-1"]
    assert len({id(provider) for provider in found}) == 2


def test_the_cache_stays_whole_under_many_threads() -> None:
    loader = Counting({f"t{n}": provider_named(f"t{n}") for n in range(50)})
    loaded = LoadedProviders(lambda: loader, ttl=60, size=20)

    def ask(index: int) -> None:
        for round_ in range(200):
            name = f"t{(index * 7 + round_) % 50}"
            provider = loaded.get(name)
            assert provider is not None
            assert provider.name == name
            if round_ % 17 == 0:
                loaded.forget(name)

    in_threads(ask, 8)
    assert len(loaded) <= 20


def test_the_ttl_of_the_app_is_real_time(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    app, tenants = tenant_app(make_app, customers, SOCIAL_OAUTH2_PROVIDER_CACHE_TTL=0.2)
    client = app.test_client()
    assert client.get("/authenticate/acme").status_code == 302
    time.sleep(0.3)
    assert client.get("/authenticate/acme").status_code == 302
    assert tenants.calls == ["acme", "acme"]


# -- a block changed while a sign-in is under way -------------------------------------------------


@pytest.mark.parametrize("how", ["forget_provider", "ttl"])
def test_a_block_changed_mid_flow_is_a_state_error_and_no_token_request(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider], how: str
) -> None:
    ttl = 0.2 if how == "ttl" else 60
    app, tenants = tenant_app(make_app, customers, SOCIAL_OAUTH2_PROVIDER_CACHE_TTL=ttl)
    outcome = watch(app)
    client = app.test_client()
    started = client.get("/authenticate/acme")
    assert started.status_code == 302
    callback = follow_to_provider(started.headers["Location"])
    # The customer moves to another server (and client) while the user is at the first one.
    other = customers["globex"]
    other.register_client("acme-new", CLIENT_SECRET, ["http://localhost/authenticate/acme"])
    tenants.blocks["acme"] = customer_block(other, "acme", clientID="acme-new")
    if how == "forget_provider":
        with app.app_context():
            tenants.social.forget_provider("acme")
    else:
        time.sleep(0.3)
    response = client.get("/authenticate/acme?" + callback.split("?", 1)[1])
    assert response.status_code == 400
    assert isinstance(outcome.error, StateError)
    assert customers["acme"].token_requests == []
    assert other.token_requests == []
    assert tenants.calls == ["acme", "acme"]
    assert sign_in(client, "acme").status_code == 302  # the new block works from a new start
    assert len(other.token_requests) == 1


# -- the CLI --------------------------------------------------------------------------------------


def test_check_and_providers_take_a_loaded_name(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    app, tenants = tenant_app(make_app, customers)
    runner = app.test_cli_runner()
    checked = runner.invoke(social_cli, ["check", "--provider", "acme"])
    assert checked.exit_code == 0, checked.output
    assert checked.stdout == "ok: 1 provider (acme)\n"
    listed = runner.invoke(social_cli, ["providers", "--provider", "globex"])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines()[0] == "globex"
    assert f"token:          {customers['globex'].token_url}" in listed.stdout
    assert CLIENT_SECRET not in listed.stdout
    assert len(app.extensions["social_oauth2"].loaded) == 0  # the CLI keeps nothing

    missing = runner.invoke(social_cli, ["providers", "--provider", "initech"])
    assert missing.exit_code == 2
    assert "no provider named 'initech'" in missing.stderr
    keys = runner.invoke(social_cli, ["keys", "initech"])
    assert keys.exit_code == 2
    assert "no provider named 'initech'" in keys.stderr
    keys = runner.invoke(social_cli, ["keys", "acme"])
    assert keys.exit_code == 1
    assert "provider 'acme' signs with a private key" in keys.stderr
    unknown = runner.invoke(social_cli, ["check", "--provider", "initech"])
    assert unknown.exit_code == 1
    assert "error: no provider named 'initech'" in unknown.stderr

    tenants.blocks["acme"] = valid_block(redirectURL="/authenticate/acme", colour="blue")
    broken = runner.invoke(social_cli, ["check", "--provider", "acme"])
    assert broken.exit_code == 1
    assert "key 'colour'" in broken.stderr


def test_a_loaded_block_signing_with_a_private_key_serves_its_public_key_set(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    app, tenants = tenant_app(make_app, customers)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")
    tenants.blocks["acme"] = customer_block(
        customers["acme"],
        "acme",
        clientSecret=pem,
        customProperties={"tokenEndpointAuthMethod": "private_key_jwt", "keyID": "acme-1"},
    )
    served = app.test_client().get("/authenticate/acme/jwks.json")
    assert served.status_code == 200
    assert served.json is not None
    (jwk,) = served.json["keys"]
    assert (jwk["kid"], jwk["kty"], jwk["crv"]) == ("acme-1", "EC", "P-256")
    assert "d" not in jwk
    assert app.test_client().get("/authenticate/globex/jwks.json").status_code == 404


def test_forget_provider_in_a_request_drops_the_answer(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    app, tenants = tenant_app(make_app, customers)

    @app.post("/admin/<name>/delete")
    def delete(name: str) -> Any:
        tenants.blocks.pop(name)
        tenants.social.forget_provider(name)
        session["done"] = True
        return {"deleted": name}

    client = app.test_client()
    assert client.get("/authenticate/acme").status_code == 302
    assert client.post("/admin/acme/delete").json == {"deleted": "acme"}
    assert client.get("/authenticate/acme").status_code == 404
    with app.test_request_context():
        assert signed_in() == {}


# -- scale -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_memory_stays_flat_from_1000_to_100000_tenants_signing_in(
    make_app: MakeApp, customers: dict[str, LocalIdentityProvider]
) -> None:
    """Every distinct tenant name starts a sign-in, its provider built by the loader; the kept
    answers are bounded by SOCIAL_OAUTH2_PROVIDER_CACHE_SIZE, so memory does not grow with the
    number of tenants. Measured with tracemalloc, not timed. The first 1,000 and the last
    1,000 start at the route; those between are looked up as the route looks them up
    (``Runtime.find_provider``), which is where a name is loaded and kept."""
    app = make_app({})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    server = customers["acme"]

    @social.provider_loader
    def any_tenant(name: str) -> SocialProvider | None:
        return social.build_provider(name, customer_block(server, name))

    client = app.test_client(use_cookies=False)
    state = app.extensions["social_oauth2"]

    def start(first: int, last: int) -> None:
        for number in range(first, last):
            response = client.get(f"/authenticate/tenant-{number}")
            assert response.status_code == 302

    tracemalloc.start()
    try:
        start(0, 1_000)
        gc.collect()
        at_1k = tracemalloc.get_traced_memory()[0]
        with app.test_request_context():
            for number in range(1_000, 99_000):
                assert state.find_provider(f"tenant-{number}") is not None
        start(99_000, 100_000)
        gc.collect()
        at_100k = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(state.loaded) == 1024
    growth = at_100k - at_1k
    assert growth < 512 * 1024, f"grew {growth} bytes from 1,000 to 100,000 tenants"
