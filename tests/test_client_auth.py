"""Client authentication (client_auth.py): secret post and basic, JWT assertions (RFC 7523)
made fresh per request, the public JWK set; proven against panva's certified oidc-provider."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from flask import Flask
from helpers import MakeApp, assert_not_logged, sign_in
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey, RSAKey
from oidc_provider_server import OidcProviderServer

from flask_social_oauth2.cli import social_cli
from flask_social_oauth2.config.settings import OAuth2Settings
from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.oauth import client_auth

Factory = Callable[..., OidcProviderServer]
REDIRECT = "http://localhost/authenticate/op"


def pem(key: Any) -> str:
    text: bytes = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return text.decode()


EC_PEM = pem(ec.generate_private_key(ec.SECP256R1()))
RSA_PEM = pem(rsa.generate_private_key(65537, 2048))


SECRET = "s3cret-value-of-at-least-32-bytes-long"


def settings(method: str, secret: str = SECRET, **custom: str) -> OAuth2Settings:
    return OAuth2Settings.from_config(
        {
            "accessTokenURL": "https://op.example/token",
            "redirectURL": "/authenticate/op",
            "clientID": "app",
            "clientSecret": secret,
            "customProperties": {"tokenEndpointAuthMethod": method, **custom},
        }
    )


# -- the methods, one request each ----------------------------------------------------------------


def test_secret_methods_and_none() -> None:
    post = client_auth.credentials(
        "client_secret_post", settings("client_secret_post"), audience="a"
    )
    assert post.fields == (("client_secret", SECRET),)
    basic = client_auth.credentials(
        "client_secret_basic", settings("client_secret_basic"), audience="a"
    )
    assert basic.headers["Authorization"] == client_auth.basic_credentials("app", SECRET)
    assert client_auth.credentials("none", settings("none"), audience="a").fields == ()
    assert "s3cret" not in repr(post) + repr(basic)


@pytest.mark.parametrize(("key_pem", "algorithm"), [(EC_PEM, "ES256"), (RSA_PEM, "RS256")])
def test_private_key_jwt_assertion_is_fresh_and_verifiable(key_pem: str, algorithm: str) -> None:
    block = settings("private_key_jwt", key_pem, keyID="k-1")
    made = [
        client_auth.credentials(
            "private_key_jwt", block, audience="https://op.example", now=1_800_000_000, key_id="k-1"
        )
        for _ in range(200)
    ]
    public = ECKey.import_key(key_pem) if algorithm == "ES256" else RSAKey.import_key(key_pem)
    jtis = set()
    for credentials in made:
        fields = dict(credentials.fields)
        assert fields["client_assertion_type"] == client_auth.ASSERTION_TYPE
        token = jwt.decode(fields["client_assertion"], public, algorithms=[algorithm])
        assert token.header == {"alg": algorithm, "typ": "JWT", "kid": "k-1"}
        claims = token.claims
        assert (claims["iss"], claims["sub"], claims["aud"]) == ("app", "app", "https://op.example")
        assert claims["exp"] - claims["iat"] == client_auth.ASSERTION_LIFETIME
        jtis.add(claims["jti"])
    assert len(jtis) == 200
    assert key_pem.split("\n")[1] not in repr(made[0])


def test_client_secret_jwt_is_hs256_with_the_secret() -> None:
    fields = dict(
        client_auth.credentials(
            "client_secret_jwt", settings("client_secret_jwt"), audience="https://op.example"
        ).fields
    )
    key = OctKey.import_key(SECRET.encode())
    claims = jwt.decode(fields["client_assertion"], key, algorithms=["HS256"]).claims
    assert claims["sub"] == "app"


def test_public_jwks_has_no_private_member() -> None:
    for key_pem in (EC_PEM, RSA_PEM):
        jwks = client_auth.public_jwks(settings("private_key_jwt", key_pem, keyID="k-1"))
        assert jwks is not None
        (key,) = jwks["keys"]
        assert key["kid"] == "k-1"
        assert key["use"] == "sig"
        assert not {"d", "p", "q", "dp", "dq", "qi"} & set(key)
    assert client_auth.public_jwks(settings("client_secret_post")) is None


@pytest.mark.parametrize(
    ("custom", "secret", "message"),
    [
        ({"tokenEndpointAuthMethod": "tls_client_auth"}, "x", "must be one of"),
        ({"tokenEndpointAuthMethod": "client_secret_jwt"}, "short", "at least 32 bytes"),
        ({"tokenEndpointAuthMethod": "private_key_jwt"}, "not a key", "clientSecret"),
        (
            {"tokenEndpointAuthMethod": "private_key_jwt"},
            pem(ec.generate_private_key(ec.SECP384R1())),
            "P-256",
        ),
        (
            {"tokenEndpointAuthMethod": "private_key_jwt"},
            pem(rsa.generate_private_key(65537, 1024)),  # noqa: S505 - refused, as it must be
            "2048 bits",
        ),
    ],
)
def test_a_bad_method_or_key_is_a_configuration_error_without_the_key(
    make_app: MakeApp, custom: dict[str, str], secret: str, message: str
) -> None:
    block = {
        "accessTokenURL": "https://op.example/token",
        "apiURL": "https://op.example/me",
        "redirectURL": "/authenticate/op",
        "clientID": "app",
        "clientSecret": secret,
        "customProperties": custom,
    }
    with pytest.raises(ConfigurationError, match=message) as raised:
        make_app({"op": block})
    assert len(secret) < 40 or secret[40:80] not in str(raised.value)


# -- against the certified server -----------------------------------------------------------------


def op_block(server: OidcProviderServer, method: str, secret: str, **custom: str) -> Any:
    return {
        "accessTokenURL": f"{server.issuer}/token",
        "redirectURL": "/authenticate/op",
        "clientID": "app",
        "clientSecret": secret,
        "scope": "openid email",
        "customProperties": {
            "issuer": server.issuer,
            "tokenEndpointAuthMethod": method,
            "pushedAuthorization": "off",
            **custom,
        },
    }


def sign_in_at(app: Flask, server: OidcProviderServer) -> Any:
    """A whole sign-in with the app's provider ``op`` at ``server``."""
    return sign_in(app.test_client(), "op", authorize=lambda url: server.authorize(url, REDIRECT))


@pytest.mark.parametrize("key_pem", [EC_PEM, RSA_PEM], ids=["ES256", "RS256"])
def test_private_key_jwt_signs_in_and_refreshes_at_the_certified_server(
    make_app: MakeApp,
    oidc_provider_factory: Factory,
    captured_logs: list[logging.LogRecord],
    key_pem: str,
) -> None:
    jwks = client_auth.public_jwks(settings("private_key_jwt", key_pem, keyID="k-1"))
    server = oidc_provider_factory(
        [
            {
                "client_id": "app",
                "token_endpoint_auth_method": "private_key_jwt",
                "token_endpoint_auth_signing_alg": jwks["keys"][0]["alg"] if jwks else "",
                "jwks": jwks,
                "redirect_uris": [REDIRECT],
            }
        ],
        par_required=False,
    )
    app = make_app({"op": op_block(server, "private_key_jwt", key_pem, keyID="k-1")})
    answer = sign_in_at(app, server)
    assert answer.status_code == 302, answer.text
    token_requests = [entry for entry in server.log() if entry.get("route") == "token"]
    assert [entry["status"] for entry in token_requests] == [200]
    assert token_requests[0]["client_assertion"] is True
    assert token_requests[0]["client_assertion_aud"] == server.issuer
    assert_not_logged(captured_logs, [key_pem.split("\n")[1]])


def test_client_secret_jwt_signs_in_at_the_certified_server(
    make_app: MakeApp, oidc_provider_factory: Factory
) -> None:
    secret = "a-shared-secret-of-at-least-32-bytes!!"
    server = oidc_provider_factory(
        [
            {
                "client_id": "app",
                "client_secret": secret,
                "token_endpoint_auth_method": "client_secret_jwt",
                "redirect_uris": [REDIRECT],
            }
        ],
        par_required=False,
    )
    app = make_app({"op": op_block(server, "client_secret_jwt", secret)})
    assert sign_in_at(app, server).status_code == 302
    (token,) = [entry for entry in server.log() if entry.get("route") == "token"]
    assert token["status"] == 200
    assert token["client_assertion"] is True


def test_the_jwks_is_served_and_printed_public_only(make_app: MakeApp) -> None:
    block = {
        "accessTokenURL": "https://op.example/token",
        "apiURL": "https://op.example/me",
        "redirectURL": "/authenticate/op",
        "clientID": "app",
        "clientSecret": EC_PEM,
        "customProperties": {"tokenEndpointAuthMethod": "private_key_jwt", "keyID": "k-1"},
    }
    plain = {
        **block,
        "redirectURL": "/authenticate/plain",
        "clientSecret": "s",
        "customProperties": {},
    }
    app = make_app({"op": block, "plain": plain})
    client = app.test_client()
    served = client.get("/authenticate/op/jwks.json")
    assert served.status_code == 200
    assert served.mimetype == "application/json"
    assert served.json == client_auth.public_jwks(settings("private_key_jwt", EC_PEM, keyID="k-1"))
    assert client.get("/authenticate/plain/jwks.json").status_code == 404
    assert client.get("/authenticate/nobody/jwks.json").status_code == 404
    printed = app.test_cli_runner().invoke(social_cli, ["keys"])
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.output) == served.json
    one = app.test_cli_runner().invoke(social_cli, ["keys", "plain"])
    assert one.exit_code != 0
    assert "plain" in one.output
