"""Sign-in with Google's button, One Tap or FedCM, in a real headless Chromium, with a stand-in
for Google on loopback.

Google's script cannot be fetched here. The stand-in does what it does: served from the issuer's
origin (``127.0.0.1``, another site than the app on ``localhost``), it reads the
``g_id_onload`` element's ``data-`` attributes, obtains an ID token for the page's client and
nonce from the issuer (as Google's popup or the browser's FedCM dialog hands the page one), sets
the ``g_csrf_token`` cookie and POSTs ``credential`` and ``g_csrf_token`` to ``data-login_uri``
from the app's own page. The issuer serves a discovery document and key set the app verifies
the token with.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from flask import Flask, Response, jsonify, request, session
from helpers import one_tap_block, record_cookies_set, signed
from joserfc.jwk import RSAKey
from markupsafe import escape
from test_browser import TIMEOUT_MS, browser  # noqa: F401 (the fixture)

from flask_social_oauth2 import OAuth2Provider, SocialOAuth2
from flask_social_oauth2.local_idp.serving import LoopbackServer
from flask_social_oauth2.runtime import current_runtime
from flask_social_oauth2.web.id_token_sign_in import one_tap

pytestmark = pytest.mark.browser

#: What Google's client script does with the page's ``g_id_onload`` element, in short.
STAND_IN_SCRIPT = """
(function () {
  var settings = document.getElementById("g_id_onload").dataset;
  var button = document.createElement("button");
  button.id = "g-sign-in";
  button.type = "button";
  button.textContent = "Sign in with Google";
  document.querySelector(".g_id_signin").appendChild(button);
  button.addEventListener("click", function () {
    var query = new URLSearchParams({client_id: settings.client_id, nonce: settings.nonce});
    fetch(ISSUER + "/credential?" + query).then(function (answer) {
      return answer.json();
    }).then(function (answer) {
      var pair = Array.from(crypto.getRandomValues(new Uint8Array(16)), function (b) {
        return b.toString(16).padStart(2, "0");
      }).join("");
      document.cookie = "g_csrf_token=" + pair + "; path=/; SameSite=Lax";
      var form = document.createElement("form");
      form.method = "post";
      form.action = settings.login_uri;
      [["credential", answer.credential], ["g_csrf_token", pair], ["select_by", "btn"]]
        .forEach(function (pairOfField) {
          var input = document.createElement("input");
          input.type = "hidden";
          input.name = pairOfField[0];
          input.value = pairOfField[1];
          form.appendChild(input);
        });
      document.body.appendChild(form);
      form.submit();
    });
  });
})();
"""


@dataclass
class Issuer:
    """The stand-in for Google: discovery, key set, client script, and the ID tokens it
    hands pages (each one recorded)."""

    server: LoopbackServer
    url: str
    handed: list[str] = field(default_factory=list)


def start_issuer(app_origin: str) -> Issuer:
    key = RSAKey.generate_key(2048, parameters={"kid": "google-1", "use": "sig"})
    flask_app = Flask("google_stand_in")
    server = LoopbackServer(flask_app, "127.0.0.1", 0)
    issuer = Issuer(server, f"http://127.0.0.1:{server.port}")

    @flask_app.get("/.well-known/openid-configuration")
    def document() -> Response:
        return jsonify(
            issuer=issuer.url,
            authorization_endpoint=f"{issuer.url}/authorize",
            token_endpoint=f"{issuer.url}/token",
            jwks_uri=f"{issuer.url}/jwks",
            response_types_supported=["code", "id_token"],
            subject_types_supported=["public"],
            id_token_signing_alg_values_supported=["RS256"],
        )

    @flask_app.get("/jwks")
    def jwks() -> Response:
        return jsonify(keys=[key.as_dict(private=False)])

    @flask_app.get("/gsi/client")
    def client_script() -> Response:
        script = f"var ISSUER = {json.dumps(issuer.url)};\n{STAND_IN_SCRIPT}"
        return Response(script, mimetype="text/javascript")

    @flask_app.get("/credential")
    def credential() -> Response:
        now = int(time.time())
        claims = {
            "iss": issuer.url,
            "azp": request.args["client_id"],
            "aud": request.args["client_id"],
            "sub": "110169484474386276334",
            "hd": "example.test",
            "email": "ada@example.test",
            "email_verified": True,
            "name": "Ada Lovelace",
            "picture": "https://lh3.googleusercontent.com/a/ada",
            "nonce": request.args["nonce"],
            "iat": now,
            "exp": now + 3600,
            "jti": secrets.token_hex(8),
        }
        token = signed(key, "RS256", claims)
        issuer.handed.append(token)
        answer = jsonify(credential=token)
        answer.headers["Access-Control-Allow-Origin"] = app_origin
        return answer

    return issuer


@dataclass
class Site:
    url: str
    issuer: Issuer
    posts: list[dict[str, Any]]


@pytest.fixture
def site() -> Iterator[Site]:
    app = Flask("one_tap_browser_app")
    serving = LoopbackServer(app, "localhost", 0)  # no request before the app is set up
    url = f"http://localhost:{serving.port}"
    issuer = start_issuer(url)
    try:
        posts: list[dict[str, Any]] = []
        app.config.update(
            SECRET_KEY="one-tap-browser-test",
            TRUSTED_HOSTS=["localhost"],
            SOCIAL_OAUTH2_PROVIDERS={"google": one_tap_block(issuer.url)},
        )
        social = SocialOAuth2(app)

        @app.before_request
        def record() -> None:
            if request.method == "POST":
                posts.append(
                    {
                        "site": request.headers.get("Sec-Fetch-Site"),
                        "cookies": sorted(request.cookies),
                        "pair": request.form.get("g_csrf_token")
                        == request.cookies.get("g_csrf_token"),
                    }
                )

        @app.get("/sign-in")
        def sign_in_page() -> Response:
            runtime = current_runtime()
            google = runtime.providers["google"]
            assert isinstance(google, OAuth2Provider)
            markup = one_tap(google, runtime, "/account")
            attributes = " ".join(
                f'{name}="{escape(value)}"' for name, value in markup.data_attributes().items()
            )
            page = (
                "<!doctype html><html lang='en'><title>Sign in</title>"
                f'<script src="{issuer.url}/gsi/client" async></script>'
                f'<div id="g_id_onload" {attributes}></div><div class="g_id_signin"></div>'
            )
            answer = Response(page, mimetype="text/html")
            answer.headers["Content-Security-Policy"] = (
                f"default-src 'none'; script-src {issuer.url}/gsi/client;"
                f" connect-src {issuer.url}/; form-action 'self'; base-uri 'none'"
            )
            return answer

        @app.get("/favicon.ico")
        def favicon() -> Response:
            return Response(status=204)

        @app.get("/account")
        def account() -> str:
            profile = session.get("social_profile") or {}
            name = escape(profile.get("full_name"))
            return f"<!doctype html><title>Account</title><p id='name'>{name}</p>"

        @social.on_error
        def failed(provider: str, error: Any) -> tuple[str, int]:
            shown = escape(type(error).__name__)
            return (
                f"<!doctype html><title>Refused</title><p id='error'>{shown}</p>",
                error.status_code,
            )

        yield Site(url, issuer, posts)
    finally:
        serving.stop()
        issuer.server.stop()


def _new_page(chromium: Any) -> tuple[Any, Any]:
    context = chromium.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return context, page


def test_the_stand_in_button_signs_in_with_the_posted_id_token(
    browser: Any,  # noqa: F811 (the fixture)
    site: Site,
    tmp_path: Any,
) -> None:
    context, page = _new_page(browser)
    errors: list[str] = []
    page.on(
        "console",
        lambda message: errors.append(message.text) if message.type == "error" else None,
    )
    nonce_cookies = record_cookies_set(page, "social_oauth2_state_")
    try:
        page.goto(f"{site.url}/sign-in")
        page.screenshot(path=str(tmp_path / "1-sign-in.png"))
        page.click("#g-sign-in")
        page.wait_for_url(f"{site.url}/account")
        assert page.text_content("#name") == "Ada Lovelace"
        page.screenshot(path=str(tmp_path / "2-signed-in.png"))
    finally:
        context.close()
    assert errors == []  # no Content-Security-Policy violation, no failed request
    (post,) = site.posts
    assert post["site"] == "same-origin"  # posted from the app's own page
    assert post["pair"] is True
    assert any(name.endswith("_nonce") for name in post["cookies"])
    assert nonce_cookies
    assert all("HttpOnly" in value and "SameSite=Lax" in value for value in nonce_cookies)
    assert len(site.issuer.handed) == 1


def test_a_credential_replayed_in_another_browser_signs_nobody_in(
    browser: Any,  # noqa: F811 (the fixture)
    site: Site,
) -> None:
    context, page = _new_page(browser)
    try:
        page.goto(f"{site.url}/sign-in")
        page.click("#g-sign-in")
        page.wait_for_url(f"{site.url}/account")
    finally:
        context.close()
    (credential,) = site.issuer.handed
    # another browser, with its own g_csrf_token pair and a nonce of its own, posts it
    context, page = _new_page(browser)
    try:
        page.goto(f"{site.url}/sign-in")
        page.evaluate(
            """(credential) => {
              document.cookie = "g_csrf_token=stolen; path=/";
              const form = document.createElement("form");
              form.method = "post";
              form.action = "/authenticate/google";
              const fields = [["credential", credential], ["g_csrf_token", "stolen"]];
              for (const [name, value] of fields) {
                const input = document.createElement("input");
                input.type = "hidden"; input.name = name; input.value = value;
                form.appendChild(input);
              }
              document.body.appendChild(form);
              form.submit();
            }""",
            credential,
        )
        page.wait_for_selector("#error")
        assert page.text_content("#error") == "StateError"
        page.goto(f"{site.url}/account")
        assert page.text_content("#name") == "None"
    finally:
        context.close()
