"""Sign-out that reaches the provider: RP-Initiated Logout 1.0 (social.logout_redirect and the
``<url rule>/logged-out`` return), against the local identity provider over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from flask import Flask
from helpers import (
    ALICE,
    CLIENT_ID,
    MakeApp,
    callback_path,
    discovery_block,
    idp_block,
    make_token,
    query_of,
    sign_in,
    start_flow,
)

from flask_social_oauth2 import OAuth2Info, SocialOAuth2, signals
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.oauth.metadata import ProviderMetadata
from flask_social_oauth2.oidc.logout_token import sid_of
from flask_social_oauth2.tokens import SQLAlchemyTokenStore

LOGGED_OUT = "http://localhost/authenticate/local/logged-out"


def with_sid(idp: LocalIdentityProvider, sid: str = "op-session-1") -> None:
    """Make the local identity provider's ID tokens carry ``sid``, as a provider with
    session-aware logout does."""
    idp.id_token_tamper = lambda header, claims: (header, {**claims, "sid": sid})


def logout_app(make_app: MakeApp, block: dict[str, Any], **config: Any) -> Flask:
    """An app with ``local`` and the sign-out view of the docs at ``POST /logout``; the
    tokens of each sign-in are recorded in ``app.config["SIGNED_IN"]``."""
    app = make_app({"local": block}, **config)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    infos: list[OAuth2Info] = []
    app.config["SIGNED_IN"] = infos

    def record(sender: Flask, provider: Any, info: OAuth2Info, profile: Any) -> None:
        infos.append(info)

    signals.authenticated.connect(record, app, weak=False)

    @app.post("/logout")
    def logout() -> Any:
        from flask import request

        return social.logout_redirect("local", next=request.args.get("next", "/"))

    return app


def signed_in_names(client: Any) -> dict[str, Any]:
    with client.session_transaction() as browser:
        return dict(browser.get("social_oauth2_identities") or {})


def test_logout_redirect_sends_the_kept_id_token_and_comes_back_to_next(
    make_app: MakeApp, idp: LocalIdentityProvider, tmp_path: Path
) -> None:
    with_sid(idp)
    store = f"sqlite:///{tmp_path / 'tokens.sqlite3'}"
    app = logout_app(make_app, discovery_block(idp), SOCIAL_OAUTH2_TOKEN_STORE=store)
    client = app.test_client()
    assert sign_in(client).status_code == 302
    assert signed_in_names(client) == {"local": ALICE.sub}
    (info,) = app.config["SIGNED_IN"]
    id_token = info.params["id_token"]

    answer = client.post("/logout?next=/after")
    assert answer.status_code == 302
    assert answer.headers["Cache-Control"] == "no-store"
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    location = answer.headers["Location"]
    assert location.startswith(f"{idp.end_session_url}?")
    query = query_of(location)
    assert query == {
        "client_id": CLIENT_ID,
        "id_token_hint": id_token,
        "logout_hint": "op-session-1",
        "post_logout_redirect_uri": LOGGED_OUT,
        "state": query["state"],
    }
    assert len(query["state"]) >= 20
    assert signed_in_names(client) == {}  # signed out here before the provider is asked

    at_provider = requests.get(location, allow_redirects=False, timeout=10)
    assert at_provider.status_code == 302
    back = at_provider.headers["Location"]
    assert back == f"{LOGGED_OUT}?state={query['state']}"
    (seen,) = idp.logout_requests
    assert seen["id_token_hint"] == id_token

    returned = client.get(callback_path(back))
    assert returned.status_code == 302
    assert returned.headers["Location"] == "/after"
    assert returned.headers["Cache-Control"] == "no-store"
    again = client.get(callback_path(back))
    assert again.status_code == 400
    assert "invalid, was used already" in again.text


def signed_in_with_sql(
    make_app: MakeApp, idp: LocalIdentityProvider, path: Path
) -> tuple[Flask, Any]:
    """The app of :func:`logout_app` with a SQLite store at ``path``, and a browser signed in."""
    app = logout_app(make_app, discovery_block(idp), SOCIAL_OAUTH2_TOKEN_STORE=f"sqlite:///{path}")
    client = app.test_client()
    sign_in(client)
    return app, client


def test_the_sql_store_keeps_the_id_token_encrypted(
    make_app: MakeApp, idp: LocalIdentityProvider, tmp_path: Path
) -> None:
    path = tmp_path / "tokens.sqlite3"
    app, _ = signed_in_with_sql(make_app, idp, path)
    (info,) = app.config["SIGNED_IN"]
    store = app.extensions["social_oauth2"].token_store
    assert isinstance(store, SQLAlchemyTokenStore)
    with app.app_context():
        kept = store.load("local", ALICE.sub)
    assert kept is not None
    assert kept.params["id_token"] == info.params["id_token"]
    with sa.create_engine(f"sqlite:///{path}").connect() as connection:
        rows = connection.execute(sa.text("SELECT * FROM social_oauth2_identities")).all()
    assert len(rows) == 1
    assert info.params["id_token"] not in " ".join(map(str, rows[0]))


def test_a_refresh_without_an_id_token_keeps_the_sign_ins(tmp_path: Path) -> None:
    app = Flask("refresh")
    app.config["SECRET_KEY"] = "test-secret-key"
    store = SQLAlchemyTokenStore(f"sqlite:///{tmp_path / 'tokens.sqlite3'}")
    first = make_token(expired=True)
    renewed = make_token()
    renewed = OAuth2Info(access_token=renewed.access_token, expires_in=3600)
    with app.app_context():
        store.save("local", "alice", first)
        after = store.refresh("local", "alice", lambda current: renewed)
        again = store.load("local", "alice")
    assert after.access_token == renewed.access_token
    assert after.params["id_token"] == first.params["id_token"]
    assert again is not None
    assert again.params["id_token"] == first.params["id_token"]


def test_an_unreadable_kept_token_signs_out_without_a_hint(
    make_app: MakeApp, idp: LocalIdentityProvider, tmp_path: Path
) -> None:
    path = tmp_path / "tokens.sqlite3"
    _, client = signed_in_with_sql(make_app, idp, path)
    with sa.create_engine(f"sqlite:///{path}").begin() as connection:
        connection.execute(sa.text("UPDATE social_oauth2_identities SET tokens = 'damaged'"))
    location = client.post("/logout").headers["Location"]
    assert set(query_of(location)) == {"client_id", "post_logout_redirect_uri", "state"}
    assert signed_in_names(client) == {}


def test_with_the_session_store_no_id_token_hint_is_sent(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    with_sid(idp)
    app = logout_app(make_app, discovery_block(idp))
    client = app.test_client()
    sign_in(client)
    location = client.post("/logout").headers["Location"]
    query = query_of(location)
    assert set(query) == {"client_id", "post_logout_redirect_uri", "state"}
    assert query["post_logout_redirect_uri"] == LOGGED_OUT
    with client.session_transaction() as browser:
        assert not browser.get("social_oauth2_tokens")
        assert "social_profile" not in browser


def test_without_an_end_session_endpoint_it_signs_out_here_and_goes_to_next(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = logout_app(make_app, idp_block(idp))
    client = app.test_client()
    sign_in(client)
    assert signed_in_names(client)
    answer = client.post("/logout?next=/bye")
    assert answer.status_code == 302
    assert answer.headers["Location"] == "/bye"
    assert "Set-Cookie" not in answer.headers or "social_oauth2_state" not in str(
        answer.headers.getlist("Set-Cookie")
    )
    assert signed_in_names(client) == {}
    assert idp.logout_requests == []


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example", "/\\evil"])
def test_a_foreign_next_lands_on_the_start_page(
    make_app: MakeApp, idp: LocalIdentityProvider, target: str
) -> None:
    app = logout_app(make_app, discovery_block(idp))
    client = app.test_client()
    sign_in(client)
    location = client.post("/logout", query_string={"next": target}).headers["Location"]
    back = requests.get(location, allow_redirects=False, timeout=10).headers["Location"]
    assert client.get(callback_path(back)).headers["Location"] == "/"


def test_end_session_url_from_custom_properties(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = logout_app(
        make_app, idp_block(idp, customProperties={"endSessionURL": idp.end_session_url})
    )
    client = app.test_client()
    sign_in(client)
    location = client.post("/logout").headers["Location"]
    assert location.startswith(f"{idp.end_session_url}?client_id={CLIENT_ID}&")


def test_an_absolute_redirect_url_gives_the_return_its_origin(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    block = discovery_block(idp)
    block["redirectURL"] = "https://localhost/authenticate/local"
    app = logout_app(make_app, block)
    with app.test_request_context("/logout", method="POST", base_url="http://127.0.0.1"):
        social: SocialOAuth2 = app.extensions["social_oauth2"].extension
        answer = social.logout_redirect("local")
    uri = query_of(answer.headers["Location"])["post_logout_redirect_uri"]
    assert uri == "https://localhost/authenticate/local/logged-out"


def test_a_sign_in_state_is_no_sign_out_state_and_back(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = logout_app(make_app, discovery_block(idp))
    client = app.test_client()
    started = start_flow(client, "local")
    refused = client.get(f"/authenticate/local/logged-out?state={started['state']}")
    assert refused.status_code == 400
    sign_in(client)
    location = client.post("/logout").headers["Location"]
    state = query_of(location)["state"]
    as_callback = client.get(f"/authenticate/local?state={state}&code=c-1")
    assert as_callback.status_code == 400
    assert len(idp.token_requests) == 1  # the sign-in's only


def test_unknown_provider_return_is_404(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    app = logout_app(make_app, discovery_block(idp))
    assert app.test_client().get("/authenticate/nobody/logged-out?state=x").status_code == 404


def test_discovery_reads_the_logout_metadata() -> None:
    document = {
        "issuer": "https://op.example",
        "end_session_endpoint": "https://op.example/logout",
        "backchannel_logout_supported": True,
        "backchannel_logout_session_supported": True,
        "frontchannel_logout_supported": "true",  # not a JSON true: not supported
    }
    metadata = ProviderMetadata.from_document("op", document)
    assert metadata.end_session_endpoint == "https://op.example/logout"
    assert metadata.backchannel_logout_supported
    assert metadata.backchannel_logout_session_supported
    assert not metadata.frontchannel_logout_supported
    assert not metadata.frontchannel_logout_session_supported


@pytest.mark.parametrize(
    ("token", "sid"),
    [
        (None, None),
        ("", None),
        ("a.b", None),
        ("e30.eyJzaWQiOiJzLTEifQ.sig", "s-1"),
        ("e30.eyJzaWQiOjF9.sig", None),
        ("e30.!!!.sig", None),
        ("e30.W10.sig", None),
    ],
)
def test_sid_of_a_kept_id_token(token: str | None, sid: str | None) -> None:
    assert sid_of(token) == sid


# -- the addresses to register -------------------------------------------------------------------


def test_flask_social_providers_prints_the_sign_out_urls_to_register(
    make_app: MakeApp, idp: LocalIdentityProvider, tmp_path: Path
) -> None:
    from flask_social_oauth2.cli import social_cli

    on = discovery_block(idp, backchannelLogout="true", frontchannelLogout="true")
    on["redirectURL"] = "/authenticate/on"
    app = make_app(
        {"local": discovery_block(idp), "on": on, "plain": idp_block(idp, redirectURL="/x")},
        SOCIAL_OAUTH2_TOKEN_STORE=f"sqlite:///{tmp_path / 's.sqlite3'}",
        TRUSTED_HOSTS=["app.example"],
        SOCIAL_OAUTH2_CHECK_REDIRECT_URLS=False,
    )
    output = app.test_cli_runner().invoke(social_cli, ["providers"]).stdout
    local, on_block, plain = output.split("\n\n")
    assert "  logged-out URL: https://app.example/authenticate/local/logged-out\n" in local
    assert "back-channel" not in local
    assert "front-channel" not in local
    assert "  logged-out URL: https://app.example/authenticate/on/logged-out\n" in on_block
    assert "  back-channel:   https://app.example/authenticate/on/backchannel-logout\n" in on_block
    assert "  front-channel:  https://app.example/authenticate/on/frontchannel-logout\n" in on_block
    assert "logged-out" not in plain  # no end-session endpoint: nothing to register


def test_a_published_client_metadata_document_lists_the_logout_uris(
    make_app: MakeApp, idp: LocalIdentityProvider, tmp_path: Path
) -> None:
    from flask_social_oauth2 import OAuth2Provider
    from flask_social_oauth2.providers.hooks import ProviderHooks

    class Published(ProviderHooks):
        def client_metadata(self, provider: Any) -> dict[str, Any] | None:
            return {"client_id": "https://app.example/client.json"}

    class PublishedProvider(OAuth2Provider):
        hooks = Published()

    block = discovery_block(idp, backchannelLogout="true")
    block["redirectURL"] = "https://app.example/authenticate/local"
    app = make_app(
        {"local": block, "off": {**discovery_block(idp), "redirectURL": "/authenticate/off"}},
        SOCIAL_OAUTH2_TOKEN_STORE=f"sqlite:///{tmp_path / 's.sqlite3'}",
        SOCIAL_OAUTH2_PROVIDER_CLASSES={"local": PublishedProvider, "off": PublishedProvider},
    )
    client = app.test_client()
    document = client.get("/authenticate/local/client-metadata.json").json
    assert document == {
        "client_id": "https://app.example/client.json",
        "backchannel_logout_uri": "https://app.example/authenticate/local/backchannel-logout",
        "backchannel_logout_session_required": True,
    }
    plain = client.get("/authenticate/off/client-metadata.json").json
    assert plain == {"client_id": "https://app.example/client.json"}
