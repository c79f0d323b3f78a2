"""Linking identities to the app's users, unlinking and signing out (social.link, identity,
identities, unlink, sign_out), against the local identity provider and real databases."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from fault_server import Behaviour, FaultServer
from flask import Flask, session
from helpers import (
    ALICE,
    CLIENT_ID,
    CLIENT_SECRET,
    MakeApp,
    discovery_block,
    idp_block,
    local_provider,
    sign_in,
)

from flask_social_oauth2 import OAuth2Info, SocialOAuth2, SocialProfile, SocialProvider
from flask_social_oauth2.errors import ConfigurationError, SignInRequiredError, SocialOAuth2Error
from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser
from flask_social_oauth2.tokens import Identity, IdentityStore, SQLAlchemyTokenStore

BOB = LocalUser.from_name_email("Bob Other", "bob@example.test")


@pytest.fixture
def store(sql_store: SQLAlchemyTokenStore) -> SQLAlchemyTokenStore:
    """A SQL store on a SQLite file, and on the test run's PostgreSQL server."""
    return sql_store


@pytest.fixture
def other_idp() -> Iterator[LocalIdentityProvider]:
    """A second identity provider, configured as ``other``, approving as Bob."""
    with LocalIdentityProvider() as server:
        server.register_client(CLIENT_ID, CLIENT_SECRET, ["http://localhost/authenticate/other"])
        server.auto_approve = BOB
        yield server


def linking_app(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    store: Any,
    other: LocalIdentityProvider | None = None,
    **config: Any,
) -> Flask:
    """The pattern of the docs: find the user by the identity alone, else create one and link;
    the app's user is kept in ``session["user_id"]``."""
    custom = {"apiBaseURL": idp.api_base_url, "revocationURL": idp.revocation_url}
    providers = {"local": idp_block(idp, customProperties=custom)}
    if other is not None:
        block: dict[str, Any] = other.settings_block(
            CLIENT_ID, CLIENT_SECRET, "/authenticate/other"
        )
        block["customProperties"] = {"revocationURL": other.revocation_url}
        providers["other"] = block
    app = make_app(providers, SOCIAL_OAUTH2_TOKEN_STORE=store, **config)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    created: list[str] = []

    @social.on_authenticated
    def signed_in(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> Any:
        found = social.identity(provider.name, profile.provider_key)
        if found is not None and found.user_id is not None:
            user_id = found.user_id
        else:
            user_id = session.get("user_id") or f"user-{len(created) + 1}"
            created.append(user_id)
            social.link(user_id)
        session["user_id"] = user_id
        return {"user_id": user_id}

    @app.get("/identities")
    def identities() -> Any:
        return [list(vars_of(i)) for i in social.identities(session["user_id"])]

    @app.get("/api-me/<name>")
    def api_me(name: str) -> Any:
        return {"status": social.api(name).get(api_url(app, name)).status_code}

    @app.post("/unlink/<name>/<key>")
    def unlink(name: str, key: str) -> Any:
        social.unlink(name, key)
        return {"unlinked": True}

    @app.post("/sign-out")
    def sign_out() -> Any:
        from flask import request

        social.sign_out(revoke=request.args.get("revoke") == "1")
        session.pop("user_id", None)
        return {"signed_out": True}

    return app


def vars_of(identity: Identity) -> tuple[str, str, str | None]:
    return identity.provider, identity.provider_key, identity.user_id


def api_url(app: Flask, name: str) -> str:
    provider = app.extensions["social_oauth2"].providers[name]
    return f"{provider.settings.access_token_url.rsplit('/', 1)[0]}/api/me"


def rows(store: SQLAlchemyTokenStore) -> list[Any]:
    with store.engine.connect() as connection:
        return list(connection.execute(sa.select(store.table).order_by("provider")))


def test_a_returning_identity_finds_its_user_and_two_providers_link_to_one(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    other_idp: LocalIdentityProvider,
    store: SQLAlchemyTokenStore,
) -> None:
    app = linking_app(make_app, idp, store, other_idp)
    client = app.test_client()
    assert sign_in(client).json == {"user_id": "user-1"}
    assert sign_in(client, "other").json == {"user_id": "user-1"}  # linked to the same user
    assert client.get("/identities").json == [
        ["local", ALICE.sub, "user-1"],
        ["other", BOB.sub, "user-1"],
    ]
    stranger = app.test_client()  # another browser, the same Alice at the provider
    assert sign_in(stranger).json == {"user_id": "user-1"}  # found by the identity, not e-mail
    with app.app_context():
        assert store.identity("local", ALICE.sub) == Identity("local", ALICE.sub, "user-1")
        assert store.load("local", ALICE.sub) is not None  # linking kept the tokens
        assert store.identity("local", "nobody") is None
    assert client.get("/api-me/local").json == {"status": 200}
    assert client.get("/api-me/other").json == {"status": 200}


def test_link_names_an_identity_and_checks_the_user_id(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore
) -> None:
    app = linking_app(make_app, idp, store)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.app_context():
        assert social.link(42, provider="local", key="k1") == Identity("local", "k1", "42")
        assert social.identities(42) == [Identity("local", "k1", "42")]
        assert store.load("local", "k1") is None  # stored without tokens
        assert social.link("7", provider="local", key="k1").user_id == "7"  # re-linked
        assert social.identities("42") == []
        with pytest.raises(TypeError, match="str or an int"):
            social.link(True, provider="local", key="k1")
        with pytest.raises(ValueError, match="1 to 255"):
            social.link("", provider="local", key="k1")
        with pytest.raises(ValueError, match="1 to 255"):
            social.identities("x" * 256)
        with pytest.raises(TypeError, match="both provider and key"):
            social.link("7", provider="local")
        with pytest.raises(SocialOAuth2Error, match="call it in on_authenticated"):
            social.link("7")
    with app.test_request_context("/"), pytest.raises(SocialOAuth2Error, match="just signed in"):
        social.link("7")


@pytest.mark.parametrize("setting", ["session", "none"])
def test_linking_needs_a_store_that_keeps_identities(
    make_app: MakeApp, idp: LocalIdentityProvider, setting: str
) -> None:
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_TOKEN_STORE=setting)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    assert not isinstance(app.extensions["social_oauth2"].token_store, IdentityStore)
    with app.app_context():
        for call in (
            lambda: social.link("u", provider="local", key="k"),
            lambda: social.identity("local", "k"),
            lambda: social.identities("u"),
        ):
            with pytest.raises(SocialOAuth2Error, match="SOCIAL_OAUTH2_TOKEN_STORE to a SQL"):
                call()


def test_unlink_revokes_deletes_and_the_browser_forgets(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore
) -> None:
    app = linking_app(make_app, idp, store)
    client = app.test_client()
    sign_in(client)
    with app.app_context():
        kept = store.load("local", ALICE.sub)
    assert kept is not None
    assert client.post(f"/unlink/local/{ALICE.sub}").json == {"unlinked": True}
    (revoked,) = idp.revocation_requests
    assert revoked.form["token"] == kept.refresh_token
    assert rows(store) == []
    answer = client.get("/api-me/local")
    assert answer.status_code == 401  # SignInRequiredError through the default error page
    assert "sign in" in answer.text.lower()
    with client.session_transaction() as browser:
        assert "social_oauth2_identities" not in browser or not browser["social_oauth2_identities"]


def test_unlink_deletes_even_when_the_revocation_fails(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    store: SQLAlchemyTokenStore,
    fault_server: FaultServer,
    captured_logs: list[logging.LogRecord],
) -> None:
    fault_server.set("/r", Behaviour.respond(500, "{}"))
    app = make_app(
        {"local": idp_block(idp, customProperties={"revocationURL": f"{fault_server.url}/r"})},
        SOCIAL_OAUTH2_TOKEN_STORE=store,
    )
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    client = app.test_client()
    assert sign_in(client).status_code == 302
    with app.test_request_context("/"):
        social.unlink("local", ALICE.sub)
    assert rows(store) == []
    warnings = [r.getMessage() for r in captured_logs if r.levelno == logging.WARNING]
    assert any("was not revoked" in text and "HTTP 500" in text for text in warnings)


def test_sign_out_forgets_the_browser_and_keeps_rows_for_jobs(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore
) -> None:
    app = linking_app(make_app, idp, store)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    client = app.test_client()
    sign_in(client)
    assert client.get("/api-me/local").json == {"status": 200}
    client.post("/sign-out")
    assert client.get("/api-me/local").status_code == 401
    assert idp.revocation_requests == []
    (row,) = rows(store)
    assert row.tokens is not None
    with app.app_context():  # a job still reaches the stored identity
        assert social.api("local", key=ALICE.sub).get(api_url(app, "local")).status_code == 200


def test_sign_out_with_revoke_revokes_and_deletes(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    other_idp: LocalIdentityProvider,
    store: SQLAlchemyTokenStore,
) -> None:
    app = linking_app(make_app, idp, store, other_idp)
    client = app.test_client()
    sign_in(client)
    sign_in(client, "other")
    client.post("/sign-out?revoke=1")
    assert len(idp.revocation_requests) == 1
    assert len(other_idp.revocation_requests) == 1
    assert rows(store) == []
    assert client.get("/api-me/other").status_code == 401


def test_sign_out_with_the_session_store_drops_the_tokens_and_the_profile(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @app.post("/sign-out")
    def sign_out() -> str:
        social.sign_out()
        return "bye"

    client = app.test_client()
    sign_in(client)
    with client.session_transaction() as browser:
        assert browser["social_oauth2_tokens"]
        assert browser["social_profile"]["provider_key"] == ALICE.sub
    client.post("/sign-out")
    with client.session_transaction() as browser:
        assert not browser.get("social_oauth2_tokens")
        assert "social_profile" not in browser
        assert "social_oauth2_identities" not in browser
    with app.test_request_context("/"), pytest.raises(SignInRequiredError):
        social.api("local")


def test_logout_url_ends_the_session_at_the_provider_and_comes_back(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": discovery_block(idp)})
    with app.test_request_context("/", base_url="http://localhost"):
        url = local_provider(app).logout_url("/authenticate/local", state="s-1")
    assert url is not None
    assert url.startswith(f"{idp.url}/logout?")
    answer = requests.get(url, allow_redirects=False, timeout=10)
    assert answer.status_code == 302
    assert answer.headers["Location"] == "http://localhost/authenticate/local?state=s-1"
    (seen,) = idp.logout_requests
    assert seen == {
        "client_id": CLIENT_ID,
        "post_logout_redirect_uri": "http://localhost/authenticate/local",
        "state": "s-1",
    }


def test_logout_url_from_custom_properties_or_none(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app(
        {
            "configured": idp_block(
                idp,
                redirectURL="/authenticate/configured",
                customProperties={"endSessionURL": idp.end_session_url},
            ),
            "none": idp_block(idp, redirectURL="/authenticate/none"),
        }
    )
    with app.app_context():
        assert local_provider(app, "configured").logout_url() == (
            f"{idp.end_session_url}?client_id={CLIENT_ID}"
        )
        assert local_provider(app, "none").logout_url() is None
    assert idp.logout_requests == []
    with pytest.raises(ConfigurationError, match=r"customProperties\.endSessionURL"):
        make_app(
            {
                "bad": idp_block(
                    idp,
                    redirectURL="/authenticate/bad",
                    customProperties={"endSessionURL": "http://x.example/"},
                )
            }
        )
