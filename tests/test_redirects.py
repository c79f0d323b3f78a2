"""The redirect_uri resolver and the ``next`` check."""

from __future__ import annotations

import pytest
from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from flask_social_oauth2.web.redirects import resolve_redirect_uri, safe_next_path


@pytest.mark.parametrize(
    "value",
    [
        "https://evil.example",
        "//evil.example",
        "////evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "https:evil.example",
        "/\t/evil.example",
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "/\x00/x",
        "/ space",
        "relative/path",
        "",
        "/" + "a" * 600,
        "/caf\u00e9",
        "/\u2215\u2215evil.example",
    ],
)
def test_unsafe_next_values_are_refused(value: str) -> None:
    assert safe_next_path(value) is None


@pytest.mark.parametrize(
    "value", ["/", "/dashboard", "/a/b?c=d&e=f", "/x#section", "/%2F%2Fevil", "/caf%C3%A9"]
)
def test_same_origin_paths_are_kept(value: str) -> None:
    assert safe_next_path(value) == value


def test_absolute_redirect_url_is_used_as_it_is() -> None:
    app = Flask("x")
    with app.test_request_context("/", base_url="http://other.example"):
        url = "https://app.example/authenticate/github"
        assert resolve_redirect_uri(url) == url


def test_relative_redirect_url_uses_the_request_scheme_and_host() -> None:
    app = Flask("x")
    with app.test_request_context("/", base_url="https://app.example:8443"):
        assert (
            resolve_redirect_uri("/authenticate/github")
            == "https://app.example:8443/authenticate/github"
        )


def test_forwarded_headers_count_only_through_proxy_fix() -> None:
    app = Flask("x")
    headers = {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}

    @app.get("/where")
    def where() -> str:
        return resolve_redirect_uri("/cb")

    plain = app.test_client().get("/where", headers=headers, base_url="http://app.example")
    assert plain.text == "http://app.example/cb"
    app.wsgi_app = ProxyFix(app.wsgi_app, x_proto=1, x_host=1)  # type: ignore[method-assign]
    proxied = app.test_client().get("/where", headers=headers, base_url="http://app.example")
    assert proxied.text == "https://evil.example/cb"


def test_relative_redirect_url_keeps_the_script_root_of_a_mounted_app() -> None:
    app = Flask("x")
    with app.test_request_context(
        "/authenticate/github", base_url="https://app.example/app"
    ) as context:
        assert context.request.script_root == "/app"
        assert (
            resolve_redirect_uri("/authenticate/github")
            == "https://app.example/app/authenticate/github"
        )
