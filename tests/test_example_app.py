"""The example app: provider selection, pages, sign-out, the CLI on it, ``python -m``."""

from __future__ import annotations

import dataclasses
import html
import json
import logging
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from atproto_server import AtprotoServer, sign_in_with_handle
from flask import Flask
from flask.testing import FlaskClient
from helpers import callback_path, child_process, follow_to_provider, query_of, stop_process
from werkzeug.serving import make_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from example_app import PROVIDERS_FILE, create_app, select_blocks
from example_app.__main__ import main as example_main
from example_app.bluesky import DEFAULT_VARIABLES
from example_app.serve import APPLE_USER, CLIENT_ID, run_example
from flask_social_oauth2.cli import social_cli
from flask_social_oauth2.config.blocks import load_yaml_blocks
from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser
from flask_social_oauth2.testing import local_idp, local_idp_block, sign_in

ROOT = Path(__file__).resolve().parents[1]
GITHUB = {"GITHUB_CLIENT_ID": "gh-id", "GITHUB_CLIENT_SECRET": "gh-secret-value"}
ADA = LocalUser.from_name_email("Ada Lovelace", "ada@example.test")


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests decide which providers have credentials, whatever the machine's environment."""
    for name in (
        "GITHUB_CLIENT_ID",
        "GITHUB_CLIENT_SECRET",
        "GOOGLE_CLIENT_ID",
        "GOOGLE_CLIENT_SECRET",
        "LOCAL_IDP_URL",
        "LOCAL_IDP_CLIENT_SECRET",
        "LOCAL_IDP2_URL",
        "LOCAL_IDP2_CLIENT_SECRET",
        "EXAMPLE_SECRET_KEY",
        "BLUESKY_ENTRYWAY",
        "BLUESKY_PLC_URL",
        "BLUESKY_ALLOW_LOOPBACK",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def local() -> Iterator[tuple[Flask, LocalIdentityProvider]]:
    """The example app with its local provider served by a local identity provider."""
    with local_idp() as idp:
        secret = secrets.token_urlsafe(16)
        local_idp_block(idp, "local", client_id=CLIENT_ID, client_secret=secret)
        app = create_app({"LOCAL_IDP_URL": idp.url, "LOCAL_IDP_CLIENT_SECRET": secret})
        yield app, idp


def csrf_token(client: FlaskClient) -> str:
    page = client.get("/profile").get_data(as_text=True)
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match is not None
    return match.group(1)


# -- providers.yaml ------------------------------------------------------------------------------


def test_blocks_turn_on_only_when_their_variables_are_set() -> None:
    blocks = load_yaml_blocks(PROVIDERS_FILE)
    assert list(blocks) == [
        "local", "local-two", "local-spa", "bluesky", "apple", "github", "google"
    ]  # fmt: skip
    enabled, missing = select_blocks(blocks, {})
    assert enabled == {}
    assert missing == {
        "local": ("LOCAL_IDP_CLIENT_SECRET", "LOCAL_IDP_URL"),
        "local-two": ("LOCAL_IDP2_CLIENT_SECRET", "LOCAL_IDP2_URL"),
        "local-spa": ("LOCAL_IDP_CLIENT_SECRET", "LOCAL_IDP_URL"),
        "bluesky": ("BLUESKY_ALLOW_LOOPBACK", "BLUESKY_ENTRYWAY", "BLUESKY_PLC_URL"),
        "apple": (
            "APPLE_KEY_ID",
            "APPLE_PRIVATE_KEY",
            "APPLE_SERVICES_ID",
            "APPLE_TEAM_ID",
            "APPLE_URL",
        ),
        "github": ("GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET"),
        "google": ("GOOGLE_CLIENT_ID", "GOOGLE_CLIENT_SECRET"),
    }
    enabled, missing = select_blocks(blocks, GITHUB)
    assert list(enabled) == ["github"]
    assert enabled["github"]["clientSecret"] == "gh-secret-value"
    assert list(missing) == ["local", "local-two", "local-spa", "bluesky", "apple", "google"]


def test_a_bad_variable_reference_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="'\\$\\{1X\\}' is not a valid variable name"):
        select_blocks({"x": {"clientID": "${1X}"}}, {"1X": "v"})


def test_the_local_blocks_use_the_client_the_runner_registers() -> None:
    blocks = load_yaml_blocks(PROVIDERS_FILE)
    assert blocks["local"]["clientID"] == CLIENT_ID
    assert blocks["local-two"]["clientID"] == CLIENT_ID
    assert blocks["local-spa"]["clientID"] == CLIENT_ID
    assert "authorizationURL" not in blocks["local-spa"]  # the browser runs that step


def test_github_and_google_blocks_are_valid_when_their_variables_are_set() -> None:
    app = create_app({**GITHUB, "GOOGLE_CLIENT_ID": "g", "GOOGLE_CLIENT_SECRET": "gs"})
    providers = app.extensions["social_oauth2"].providers
    assert [type(p).__name__ for p in providers.values()] == [
        "BlueskyProvider", "GitHubProvider", "GoogleProvider"
    ]  # fmt: skip


# -- pages ---------------------------------------------------------------------------------------


def test_the_sign_in_page_lists_providers_and_what_turns_the_others_on() -> None:
    app = create_app(GITHUB)
    response = app.test_client().get("/")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert 'id="provider-github"' in page
    assert 'href="/authenticate/github?next=/profile"' in page
    assert "<code>GOOGLE_CLIENT_ID</code>, <code>GOOGLE_CLIENT_SECRET</code>" in page
    assert "gh-secret-value" not in page
    nonce = re.search(r'<style nonce="([^"]+)">', page)
    assert nonce is not None
    policy = response.headers["Content-Security-Policy"]
    assert f"style-src 'nonce-{nonce.group(1)}'" in policy
    assert "default-src 'none'" in policy
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert not re.search(r'(src|href|action)="(?!/)', page), "the page refers to another site"


def test_the_ready_sign_in_page_draws_the_extensions_buttons_in_the_examples_look(
    local: tuple[Flask, LocalIdentityProvider],
) -> None:
    app, idp = local
    client = app.test_client()
    assert 'href="/sign-in"' in client.get("/").get_data(as_text=True)
    response = client.get("/sign-in")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "flask-social-oauth2 example app" in page  # the example's own template
    assert (
        '<a class="social-button social-button--neutral" href="/authenticate/local?next=/profile"'
        in page
    )
    assert "Sign in with the local identity provider" in page
    assert 'data-provider="local-spa"' not in page  # its sign-in runs in the browser
    assert '<form class="social-handle-form" method="get" action="/authenticate/bluesky"' in page
    nonce = re.search(r'<style nonce="([^"]+)">', page)
    assert nonce is not None
    assert f"style-src 'nonce-{nonce.group(1)}'" in response.headers["Content-Security-Policy"]
    assert ".social-button--bluesky" in page.split("</style>")[0]
    started = client.get("/authenticate/local?next=/profile")
    assert started.headers["Location"].startswith(idp.url)


def test_without_the_local_providers_the_page_says_how_to_start_the_example() -> None:
    page = create_app().test_client().get("/").get_data(as_text=True)
    assert "No local identity provider is running." in page
    assert "python -m example_app" in page
    assert 'id="bluesky-form"' in page  # Bluesky needs no variable: on by default
    without = create_app(config={"SOCIAL_OAUTH2_PROVIDERS": {}}).test_client().get("/")
    assert "No provider is configured." in without.get_data(as_text=True)
    assert 'id="bluesky-form"' not in without.get_data(as_text=True)


def test_the_client_side_page_gets_what_its_script_needs(
    local: tuple[Flask, LocalIdentityProvider],
) -> None:
    app, idp = local
    client = app.test_client()
    index = client.get("/").get_data(as_text=True)
    assert 'href="/client-side"' in index
    response = client.get("/client-side")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    match = re.search(r'<script type="application/json" id="client-config">(.*?)</script>', page)
    assert match is not None
    assert json.loads(match.group(1)) == {
        "authorizationURL": f"{idp.url}/authorize",
        "clientID": CLIENT_ID,
        "scope": "openid profile email",
        "redirectURI": "http://localhost/client-side",
        "postURL": "/authenticate/local-spa",
    }
    nonce = re.search(r'<script nonce="([^"]+)">', page)
    assert nonce is not None
    policy = response.headers["Content-Security-Policy"]
    assert f"script-src 'nonce-{nonce.group(1)}'" in policy
    assert "connect-src 'self'" in policy
    assert "clientSecret" not in page
    assert "crypto.subtle.digest" in page


def test_the_client_side_page_needs_its_provider() -> None:
    response = create_app(GITHUB).test_client().get("/client-side")
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


def test_sign_in_profile_and_sign_out(local: tuple[Flask, LocalIdentityProvider]) -> None:
    app, _ = local
    client = app.test_client()
    response = sign_in(client, "local", ADA, next="/profile")
    assert response.status_code == 302
    assert response.headers["Location"] == "/profile"
    assert client.get("/").headers["Location"] == "/profile"
    page = client.get("/profile").get_data(as_text=True)
    assert '<h1 id="name">Ada Lovelace</h1>' in page
    assert ADA.sub in page
    assert "Signed in with Local identity provider" in page

    refused = client.post("/sign-out", data={"csrf_token": "forged"})
    assert refused.status_code == 400
    assert client.get("/profile").status_code == 200, "a forged sign-out signed the user out"
    response = client.post("/sign-out", data={"csrf_token": csrf_token(client)})
    assert response.status_code == 303
    assert response.headers["Location"] == "/"
    assert client.get("/profile").headers["Location"] == "/"


def test_sign_out_needs_post(local: tuple[Flask, LocalIdentityProvider]) -> None:
    app, _ = local
    assert app.test_client().get("/sign-out").status_code == 405


def test_names_are_escaped(local: tuple[Flask, LocalIdentityProvider]) -> None:
    app, _ = local
    client = app.test_client()
    sign_in(client, "local", LocalUser.from_name_email("<b>Eve</b>", "eve@example.test"))
    page = client.get("/profile").get_data(as_text=True)
    assert "<b>Eve</b>" not in page
    assert "&lt;b&gt;Eve&lt;/b&gt;" in page


@pytest.mark.parametrize(
    ("outcome", "status", "title"),
    [
        ({"deny": "access_denied"}, 403, "Sign-in cancelled"),
        ({"token_failure": "server_error"}, 502, "Sign-in failed"),
    ],
)
def test_failures_show_the_error_page(
    local: tuple[Flask, LocalIdentityProvider], outcome: dict[str, str], status: int, title: str
) -> None:
    app, _ = local
    response = sign_in(app.test_client(), "local", ADA, **outcome)  # type: ignore[arg-type]
    page = response.get_data(as_text=True)
    assert response.status_code == status
    assert f'<h1 id="error-title">{title}</h1>' in page
    assert response.headers["Referrer-Policy"] == "no-referrer"


def test_flask_social_commands_on_the_example() -> None:
    with run_example(0, 0) as running:
        runner = running.app.test_cli_runner()
        check = runner.invoke(social_cli, ["check"])
        assert check.exit_code == 0, check.output
        assert check.stdout == "ok: 4 providers (local, local-two, local-spa, bluesky)\n"
        listing = runner.invoke(social_cli, ["providers"]).stdout
        assert f"  redirect URL:   {running.url}authenticate/local\n" in listing
        assert f"  profile:        {running.idp.userinfo_url}\n" in listing


def test_sign_in_with_the_local_apple_server_over_http() -> None:
    """``run_example(apple=True)``: the ``apple`` provider against the local Apple-like server,
    through its form post and the app's hop, over real HTTP (the browser proof, with the two
    on different sites, is tests/test_apple_browser.py)."""
    with run_example(0, 0, apple=True) as running:
        assert running.apple is not None
        browser = requests.Session()
        start = browser.get(f"{running.url}authenticate/apple?next=/profile", timeout=10)
        assert start.url.startswith(running.apple.url)  # Apple's form-post page
        hop = browser.post(f"{running.url}authenticate/apple", data=_hidden(start.text), timeout=10)
        assert hop.status_code == 200
        done = browser.post(f"{running.url}authenticate/apple", data=_hidden(hop.text), timeout=10)
        assert done.status_code == 200
        assert done.url == f"{running.url}profile"
        assert "Ada Lovelace" in done.text
        assert APPLE_USER.email in done.text


def _hidden(page: str) -> dict[str, str]:
    found = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page)
    return {name: html.unescape(value) for name, value in found}


# -- python -m example_app -----------------------------------------------------------------------


def test_run_example_listens_on_loopback_only() -> None:
    with run_example(0, 0) as running:
        assert running.url.startswith("http://127.0.0.1:")
        assert running.idp.host == "127.0.0.1"
        assert requests.get(running.url, timeout=10).status_code == 200
        assert requests.get(f"{running.url}favicon.ico", timeout=10).status_code == 200


def test_python_m_example_app_prints_where_to_go_and_serves() -> None:
    with child_process(
        [sys.executable, "-m", "example_app", "--port", "0", "--idp-port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as process:
        assert process.stdout is not None
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if "Press Ctrl-C" in line or not line:
                break
        output = "".join(lines)
        match = re.search(r"Open (http://127\.0\.0\.1:\d+/) ", output)
        assert match is not None, output
        assert re.search(r"identity provider\s+http://127\.0\.0\.1:\d+/", output)
        assert "github (off)        set GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET" in output
        assert "Bluesky             type your handle on the sign-in page (bsky.social)" in output
        page = requests.get(match.group(1), timeout=10)
        assert 'id="provider-local"' in page.text
        stop_process(process)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "Stopped." in out


@pytest.mark.parametrize(
    ("option", "value"), [("--port", "abc"), ("--idp-port", "5e3"), ("--port", "70000")]
)
def test_a_bad_port_is_a_usage_error_naming_the_option(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        example_main([option, value])
    assert exit_.value.code == 2
    message = capsys.readouterr().err.splitlines()[-1]
    assert message == (
        f"python -m example_app: error: argument {option}: {value!r} is not a port"
        " (a number from 0 to 65535)"
    )


def test_a_taken_port_is_a_clear_message() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "example_app", "--port", str(port), "--idp-port", "0"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} (--port)" in result.stderr
    assert "Choose free ports" in result.stderr
    assert "Traceback" not in result.stderr


# -- after sign-in, unknown pages, sign-out, the access log --------------------------------------


def test_back_to_the_callback_after_signing_in_shows_the_profile(
    local: tuple[Flask, LocalIdentityProvider],
) -> None:
    app, idp = local
    client = app.test_client()
    started = client.get("/authenticate/local", query_string={"next": "/profile"})
    idp.auto_approve = ADA
    callback = callback_path(follow_to_provider(started.headers["Location"]))
    assert client.get(callback).headers["Location"] == "/profile"
    again = client.get(callback)  # the browser's Back button
    assert again.status_code == 302
    assert again.headers["Location"] == "/profile"
    stranger = app.test_client().get(callback)  # not signed in: the failure stays a failure
    assert stranger.status_code == 400
    assert '<h1 id="error-title">Sign-in failed</h1>' in stranger.get_data(as_text=True)


@pytest.mark.parametrize(
    ("path", "title", "message"),
    [
        (
            "/authenticate/google",
            "Unknown provider",
            "Google is not configured: set GOOGLE_CLIENT_ID, GOOGLE_CLIENT_SECRET and restart.",
        ),
        ("/authenticate/nope", "Unknown provider", "This example has no provider of that name."),
        ("/nowhere", "Page not found", "There is no page at this address."),
    ],
)
def test_unknown_pages_and_providers_get_the_apps_404_page(
    path: str, title: str, message: str
) -> None:
    response = create_app(GITHUB).test_client().get(path)
    page = response.get_data(as_text=True)
    assert response.status_code == 404
    assert response.mimetype == "text/html"
    assert f'<h1 id="error-title">{title}</h1>' in page
    assert message in page
    nonce = re.search(r'<style nonce="([^"]+)">', page)
    assert nonce is not None, "not the app's styled page"
    assert f"'nonce-{nonce.group(1)}'" in response.headers["Content-Security-Policy"]


def test_signing_out_says_so_once(local: tuple[Flask, LocalIdentityProvider]) -> None:
    app, _ = local
    client = app.test_client()
    sign_in(client, "local", ADA)
    signed_out = client.post(
        "/sign-out", data={"csrf_token": csrf_token(client)}, follow_redirects=True
    )
    assert signed_out.request.path == "/"
    assert '<p class="notice" id="notice" role="status">You are signed out.</p>' in (
        signed_out.get_data(as_text=True)
    )
    assert "You are signed out." not in client.get("/").get_data(as_text=True)


def test_the_development_servers_access_log_hides_callback_codes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with local_idp() as idp:
        secret = secrets.token_urlsafe(16)
        app = create_app({"LOCAL_IDP_URL": idp.url, "LOCAL_IDP_CLIENT_SECRET": secret})
        # Werkzeug's own request handler, as `flask run` uses it.
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            base = f"http://127.0.0.1:{server.port}"
            local_idp_block(
                idp, "local", client_id=CLIENT_ID, client_secret=secret, hosts=[base[7:]]
            )
            idp.auto_approve = ADA
            browser = requests.Session()
            with caplog.at_level(logging.INFO, logger="werkzeug"):
                started = browser.get(
                    f"{base}/authenticate/local?next=/profile", allow_redirects=False, timeout=10
                )
                callback = follow_to_provider(started.headers["Location"])
                finished = browser.get(callback, allow_redirects=False, timeout=10)
        finally:
            server.shutdown()
            thread.join(10)
            server.server_close()
    assert finished.headers["Location"] == "/profile"
    query = query_of(callback)
    lines = [r.getMessage() for r in caplog.records if r.name == "werkzeug"]
    assert any("GET /authenticate/local HTTP/1.1" in line for line in lines), lines
    for line in lines:
        assert query["code"] not in line
        assert query["state"] not in line
        assert "code=" not in line


# -- the account page: link a second provider, call the APIs across a refresh, unlink -----------

BOB = LocalUser.from_name_email("Bob Builder", "bob@example.test")


@pytest.fixture
def two_local() -> Iterator[tuple[Flask, LocalIdentityProvider, LocalIdentityProvider]]:
    """The example app with both local providers, each on its own identity provider whose
    access tokens live 60 seconds."""
    with local_idp(access_token_ttl=60) as idp, local_idp(access_token_ttl=60) as idp2:
        secrets_ = {name: secrets.token_urlsafe(16) for name in ("local", "local-two")}
        local_idp_block(idp, "local", client_id=CLIENT_ID, client_secret=secrets_["local"])
        local_idp_block(idp2, "local-two", client_id=CLIENT_ID, client_secret=secrets_["local-two"])
        app = create_app(
            {
                "LOCAL_IDP_URL": idp.url,
                "LOCAL_IDP_CLIENT_SECRET": secrets_["local"],
                "LOCAL_IDP2_URL": idp2.url,
                "LOCAL_IDP2_CLIENT_SECRET": secrets_["local-two"],
            }
        )
        yield app, idp, idp2


def account_form(client: FlaskClient, action: str) -> dict[str, str]:
    page = client.get("/profile").get_data(as_text=True)
    assert f'action="{action}"' in page, page
    return {"csrf_token": csrf_token(client)}


def test_link_call_across_a_refresh_unlink_and_sign_out(
    two_local: tuple[Flask, LocalIdentityProvider, LocalIdentityProvider],
) -> None:
    app, idp, idp2 = two_local
    client = app.test_client()
    sign_in(client, "local", ADA, next="/profile")
    page = client.get("/profile").get_data(as_text=True)
    assert "Your sign-ins (Ada Lovelace)" in page
    assert 'id="link-local-two"' in page
    assert sign_in(client, "local-two", BOB).headers["Location"] == "/profile"
    page = client.get("/profile").get_data(as_text=True)
    assert 'id="identity-local"' in page
    assert 'id="identity-local-two"' in page
    assert 'id="link-local-two"' not in page
    assert "Your sign-ins (Ada Lovelace)" in page  # Bob's account is linked to Ada's user

    call = f"/call/local/{ADA.sub}"
    answer = client.post(call, data=account_form(client, call))
    assert answer.status_code == 200
    text = html.unescape(answer.get_data(as_text=True))
    assert 'id="api-status">200<' in text
    assert f'"sub": "{ADA.sub}"' in text
    assert "after refreshing" not in text
    with app.app_context():  # the minute is over
        store = app.extensions["social_oauth2"].token_store
        token = store.load("local", ADA.sub)
        store.save("local", ADA.sub, dataclasses.replace(token, expires_at=time.time() - 1))
    answer = client.post(call, data=account_form(client, call))
    assert 'id="api-refreshed"' in answer.get_data(as_text=True)
    assert [r.grant_type for r in idp.token_requests].count("refresh_token") == 1

    foreign = f"/unlink/local/{BOB.sub}"  # Bob's key at the other provider: not Ada's identity
    assert client.post(foreign, data=account_form(client, call)).status_code == 404
    unlink = f"/unlink/local-two/{BOB.sub}"
    done = client.post(unlink, data=account_form(client, unlink), follow_redirects=True)
    assert "Second local identity provider is unlinked." in done.get_data(as_text=True)
    assert len(idp2.revocation_requests) == 1
    assert 'id="identity-local-two"' not in done.get_data(as_text=True)

    other_browser = app.test_client()  # Ada again elsewhere: the same user, found by identity
    sign_in(other_browser, "local", ADA)
    assert "Your sign-ins (Ada Lovelace)" in other_browser.get("/profile").get_data(as_text=True)
    with app.app_context():
        assert app.extensions["example_users"].get("2") is None  # no second user was made

    assert client.post("/sign-out", data={"csrf_token": csrf_token(client)}).status_code == 303
    assert client.get("/profile").headers["Location"] == "/"
    refused = client.post(call, data={"csrf_token": "x"})
    assert refused.status_code == 400


def test_unlinking_the_last_identity_signs_out(
    two_local: tuple[Flask, LocalIdentityProvider, LocalIdentityProvider],
) -> None:
    app, idp, _ = two_local
    client = app.test_client()
    sign_in(client, "local", ADA)
    unlink = f"/unlink/local/{ADA.sub}"
    done = client.post(unlink, data=account_form(client, unlink), follow_redirects=True)
    assert "it was your last sign-in, so you are signed out." in done.get_data(as_text=True)
    assert len(idp.revocation_requests) == 1
    assert client.get("/profile").headers["Location"] == "/"


# -- Sign in with Bluesky: the handle form ------------------------------------------------------

LOOPBACK_APP = "http://127.0.0.1:5000"


def test_bluesky_is_on_by_default_with_the_loopback_client_and_bluesky_services() -> None:
    app = create_app()
    settings = app.extensions["social_oauth2"].providers["bluesky"].settings
    assert settings.authorization_url == "https://bsky.social/oauth/authorize"
    assert settings.access_token_url == "https://bsky.social/oauth/token"
    assert settings.client_id == "http://localhost"
    assert settings.custom_properties == {
        "handleResolver": "https://bsky.social",
        "plcURL": "https://plc.directory",
        "allowLoopback": "false",
    }
    assert DEFAULT_VARIABLES["BLUESKY_ENTRYWAY"] == "https://bsky.social"
    moved = create_app(
        {"BLUESKY_ENTRYWAY": "http://localhost:2583", "BLUESKY_ALLOW_LOOPBACK": "true"}
    )
    settings = moved.extensions["social_oauth2"].providers["bluesky"].settings
    assert settings.authorization_url == "http://localhost:2583/oauth/authorize"
    assert settings.custom_properties["handleResolver"] == "http://localhost:2583"


def test_the_sign_in_page_has_the_handle_form_and_lets_it_reach_the_accounts_server() -> None:
    client = create_app().test_client()
    response = client.get("/", base_url=LOOPBACK_APP)
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    form = re.search(r'<form class="handle-form" id="bluesky-form" (.*?)</form>', page, re.S)
    assert form is not None, page
    assert 'method="get"' in form.group(1)
    assert 'action="/authenticate/bluesky"' in form.group(1)
    assert 'name="handle"' in form.group(1)
    assert '<input type="hidden" name="next" value="/profile">' in form.group(1)
    assert "choose your account at bsky.social" in form.group(1)
    assert 'id="provider-bluesky"' not in page  # a form, not a link
    assert 'id="bluesky-host"' not in page
    # The browser follows the form's redirect to the account's server: form-action allows it.
    assert "form-action 'self' https:;" in response.headers["Content-Security-Policy"]
    elsewhere = client.get("/", base_url="http://localhost:5000").get_data(as_text=True)
    assert "open <code>http://127.0.0.1:5000/</code> instead" in elsewhere


def test_a_garbage_handle_shows_the_error_page_without_leaving_the_machine() -> None:
    """The handle's syntax is checked before any fetch: no network is needed for the 400."""
    client = create_app().test_client()
    for handle in ("not a handle", "alice..bsky.social", "alice.test", "@"):
        response = client.get(
            "/authenticate/bluesky",
            query_string={"handle": handle, "next": "/profile"},
            base_url=LOOPBACK_APP,
        )
        page = response.get_data(as_text=True)
        assert response.status_code == 400, (handle, page)
        assert '<h1 id="error-title">Sign-in failed</h1>' in page
        assert "That is not a valid handle or DID. Please check it and try again." in page
        assert "Set-Cookie" not in response.headers


def test_a_profile_without_an_e_mail_address_shows_its_handle() -> None:
    client = create_app().test_client()
    alice = {"provider_id": "bluesky", "provider_key": "did:plc:alice", "username": "alice.test"}
    with client.session_transaction() as session:
        session["social_profile"] = {**alice, "full_name": "Alice"}
    page = client.get("/profile").get_data(as_text=True)
    assert '<h1 id="name">Alice</h1>' in page
    assert '<p class="muted" id="handle">@alice.test</p>' in page
    assert '<th scope="row">Username</th>\n    <td>alice.test</td>' in page
    with client.session_transaction() as session:
        session["social_profile"] = {**alice, "full_name": None}  # no profile record
    page = client.get("/profile").get_data(as_text=True)
    assert '<h1 id="name">alice.test</h1>' in page
    assert 'id="handle"' not in page


def bluesky_environ(server: AtprotoServer) -> dict[str, str]:
    """The example's Bluesky variables for the local PDS."""
    return {
        "BLUESKY_ENTRYWAY": server.pds_url,
        "BLUESKY_PLC_URL": server.plc_url,
        "BLUESKY_ALLOW_LOOPBACK": "true",
    }


@pytest.mark.atproto
def test_a_local_user_links_bluesky_from_the_account_page_and_calls_its_pds(
    atproto_server: AtprotoServer,
) -> None:
    """Bluesky identities work with the example's users like any provider's: the DID is the
    identity's key, linked to the signed-in user, found again by the DID alone."""
    alice = atproto_server.accounts["alice.test"]
    with local_idp() as idp:
        secret = secrets.token_urlsafe(16)
        hosts = [LOOPBACK_APP.removeprefix("http://")]
        local_idp_block(idp, "local", client_id=CLIENT_ID, client_secret=secret, hosts=hosts)
        app = create_app(
            {
                "LOCAL_IDP_URL": idp.url,
                "LOCAL_IDP_CLIENT_SECRET": secret,
                **bluesky_environ(atproto_server),
            },
            {"SERVER_NAME": hosts[0]},  # the test client's requests go to 127.0.0.1:5000
        )
        client = app.test_client()
        sign_in(client, "local", ADA, next="/profile")
        page = client.get("/profile").get_data(as_text=True)
        assert "Link a Bluesky account" in page
        assert 'id="bluesky-form"' in page

        def sign_in_with_bluesky(browser: FlaskClient) -> str:
            finished = sign_in_with_handle(browser, "alice.test", alice.password, next="/profile")
            assert finished.headers["Location"] == "/profile", finished.text
            return browser.get("/profile").get_data(as_text=True)

        page = sign_in_with_bluesky(client)
        assert "Your sign-ins (Ada Lovelace)" in page
        assert 'id="identity-local"' in page
        assert 'id="identity-bluesky"' in page
        assert alice.did in page
        assert '<h1 id="name">alice.test</h1>' in page  # the last sign-in's profile: a handle
        assert 'id="bluesky-form"' not in page  # linked already

        call = f"/call/bluesky/{alice.did}"
        answer = client.post(call, data=account_form(client, call))
        text = html.unescape(answer.get_data(as_text=True))
        assert answer.status_code == 200
        assert 'id="api-status">200<' in text
        assert f'"did": "{alice.did}"' in text
        assert '"handle": "alice.test"' in text

        other_browser = app.test_client()  # alice.test again: Ada's user, found by the DID
        page = sign_in_with_bluesky(other_browser)
        assert "Your sign-ins (Ada Lovelace)" in page
        with app.app_context():
            assert app.extensions["example_users"].get("2") is None


def test_the_providers_back_channel_logout_signs_the_user_out(
    local: tuple[Flask, LocalIdentityProvider],
) -> None:
    app, idp = local
    client = app.test_client()
    sign_in(client, "local", ADA, next="/profile")
    assert client.get("/profile").status_code == 200
    token = idp.logout_token(CLIENT_ID, sub=ADA.sub)
    answer = app.test_client().post(
        "/authenticate/local/backchannel-logout", data={"logout_token": token}
    )
    assert answer.status_code == 200
    with client.session_transaction() as browser:  # the next check is due now
        checked, local_ids = browser["social_oauth2_sessions"].split(" ", 1)
        browser["social_oauth2_sessions"] = f"{int(checked) - 60} {local_ids}"
    page = client.get("/profile")
    assert page.status_code == 302
    assert page.headers["Location"] == "/"
    assert "Your session at the provider ended" in client.get("/").get_data(as_text=True)


def test_a_work_e_mail_signs_in_at_its_companys_provider_loaded_at_runtime() -> None:
    """The ready page's "Sign in with your work e-mail" form: the example's two customers,
    ``acme`` and ``globex``, are loaded at runtime (not configured), each at its own local
    identity provider, and found by their e-mail domain."""
    with local_idp() as idp, local_idp() as idp2:
        secrets_ = {}
        for server, prefix, paths in (
            (idp, "LOCAL_IDP", ("/authenticate/local", "/authenticate/acme")),
            (idp2, "LOCAL_IDP2", ("/authenticate/local-two", "/authenticate/globex")),
        ):
            secret = secrets.token_urlsafe(16)
            uris = [f"http://localhost{path}" for path in paths]
            server.register_client(CLIENT_ID, secret, uris)
            server.auto_approve = LocalUser.from_name_email("Ana Lima", f"ana@{prefix}.test")
            secrets_[f"{prefix}_URL"] = server.url
            secrets_[f"{prefix}_CLIENT_SECRET"] = secret
        app = create_app(secrets_)
        assert "acme" not in app.extensions["social_oauth2"].providers  # not configured
        client = app.test_client()
        page = client.get("/sign-in").get_data(as_text=True)
        assert '<label for="social-email">Sign in with your work e-mail</label>' in page
        for address, server, name in (
            ("ana@acme.test", idp, "acme"),
            ("bo@globex.test", idp2, "globex"),
        ):
            started = client.get("/sign-in", query_string={"email": address, "next": "/profile"})
            assert started.status_code == 302, started.text
            location = started.headers["Location"]
            assert location.startswith(server.url)
            assert query_of(location)["login_hint"] == address
            callback = follow_to_provider(location)
            assert callback.startswith(f"http://localhost/authenticate/{name}?")
            finished = client.get(callback_path(callback))
            assert finished.headers["Location"] == "/profile", finished.text
        unknown = client.get("/sign-in", query_string={"email": "eve@elsewhere.test"})
        assert unknown.status_code in (400, 404)
        assert client.get("/authenticate/initech").status_code == 404
