"""Helpers the test modules share: provider blocks, flow steps and sign-ins; for the OpenID
Connect tests, what an app's hooks saw and a hand-signed OpenID provider served by the fault
server, for answers the real one cannot give (an EC key, an HMAC token, a broken key set); for
the token store tests, tokens and a rotating renewer.

Fixtures live in conftest.py; everything a test imports by name lives here.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit

import requests
from fault_server import Behaviour, FaultServer
from flask import Flask
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from flask_social_oauth2 import (
    OAuth2Info,
    OAuth2Provider,
    SocialOAuth2,
    SocialProfile,
    SocialProvider,
)
from flask_social_oauth2.errors import AuthenticationError, SignInRequiredError
from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser
from flask_social_oauth2.signals import authentication_failed

CLIENT_ID = "test-client"
CLIENT_SECRET = "s3cr3t-client-secret-value"
ALICE = LocalUser.from_name_email("Alice Example", "alice@example.test")
LOCAL_REDIRECT = "http://localhost/authenticate/local"

MakeApp = Callable[..., Flask]


def valid_block(**changes: Any) -> dict[str, Any]:
    """A valid provider block in the specification's keys."""
    block: dict[str, Any] = {
        "authorizationURL": "https://provider.example/authorize",
        "accessTokenURL": "https://provider.example/token",
        "redirectURL": "/authenticate/example",
        "apiURL": "https://provider.example/userinfo",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email",
    }
    block.update(changes)
    return {key: value for key, value in block.items() if value is not None}


def block_for(name: str, **changes: Any) -> dict[str, Any]:
    """A valid block for the provider ``name``, its ``redirectURL`` on the default route."""
    return valid_block(**{"redirectURL": f"/authenticate/{name}", **changes})


def query_of(url: str) -> dict[str, str]:
    """The query parameters of ``url``."""
    return dict(parse_qsl(urlsplit(url).query))


def start_flow(client: Any, provider: str, **query: str) -> dict[str, str]:
    """Start a sign-in with the app's test client; the authorization request's query."""
    response = client.get(f"/authenticate/{provider}", query_string=query)
    assert response.status_code == 302, response.text
    return query_of(response.headers["Location"])


def fault_app(make_app: MakeApp, server: FaultServer, **config: Any) -> Flask:
    """An app whose provider ``faulty`` has its token and profile addresses on ``server``."""
    block = valid_block(
        redirectURL="/authenticate/faulty",
        accessTokenURL=f"{server.url}/token",
        apiURL=f"{server.url}/userinfo",
    )
    return make_app({"faulty": block}, **config)


def plain_block(server: FaultServer, name: str = "plain", **custom: str) -> dict[str, Any]:
    """A plain OAuth 2.0 block ``name`` with its token and profile addresses on ``server``
    and ``custom`` as its ``customProperties``."""
    return {
        "accessTokenURL": f"{server.url}/token",
        "redirectURL": f"/authenticate/{name}",
        "apiURL": f"{server.url}/userinfo",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "customProperties": custom,
    }


def faulty_block(server: FaultServer, **custom: str) -> dict[str, Any]:
    """The block ``faulty``: :func:`plain_block` that also starts flows at ``server``'s
    ``/authorize``."""
    return {
        **plain_block(server, "faulty", **custom),
        "authorizationURL": f"{server.url}/authorize",
    }


def idp_block(server: LocalIdentityProvider, **changes: Any) -> dict[str, Any]:
    """The provider block for ``server`` under the name ``local``."""
    block: dict[str, Any] = server.settings_block(CLIENT_ID, CLIENT_SECRET, "/authenticate/local")
    block.update(changes)
    return block


def follow_to_provider(location: str) -> str:
    """Follow the app's redirect to the provider (auto-approving); the callback URL it returns."""
    answer = requests.get(location, allow_redirects=False, timeout=10)
    assert answer.status_code in (302, 303), answer.text
    callback: str = answer.headers["Location"]
    return callback


def callback_path(callback: str) -> str:
    """The path and query of a callback URL, for the test client."""
    parts = urlsplit(callback)
    return f"{parts.path}?{parts.query}"


def sign_in(
    client: Any,
    provider: str = "local",
    *,
    code: str | None = None,
    callback: Mapping[str, str] | None = None,
    authorize: Callable[[str], str] = follow_to_provider,
    on_start: Callable[[str], None] | None = None,
    base_url: str | None = None,
    **query: str | None,
) -> Any:
    """A whole sign-in with the app's test client: the start at the app's route (a redirect,
    asserted), the provider's answer to the authorization request, then the callback with the
    client's cookies; the app's answer to the callback.

    The provider is by default the auto-approving one of the ``idp`` fixture, followed over
    HTTP. Every sign-in helper of the tests is this one.

    :param provider: The provider's name (its route ``/authenticate/<provider>``).
    :param code: Play the provider instead (its token and profile addresses are the test's own
        server): come back with this code and the flow's state.
    :param callback: Play the provider with these callback parameters (beside the state and
        ``code``), e.g. ``{"error": "access_denied"}``.
    :param authorize: Another provider that answers over HTTP: called with the authorization
        URL, it gives the callback URL.
    :param on_start: Called with the authorization URL before the provider answers.
    :param base_url: The address the app is reached at (default ``http://localhost/``).
    :param query: The start's query (``next``, ``handle``, ...; ``None`` leaves one out).
    """
    where = {} if base_url is None else {"base_url": base_url}
    start = {name: value for name, value in query.items() if value is not None}
    started = client.get(f"/authenticate/{provider}", query_string=start, **where)
    assert started.status_code == 302, started.text
    location: str = started.headers["Location"]
    if on_start is not None:
        on_start(location)
    if code is None and callback is None:
        return client.get(callback_path(authorize(location)), **where)
    answer = {} if code is None else {"code": code}
    answer["state"] = query_of(location)["state"]
    answer.update(callback or {})
    return client.get(f"/authenticate/{provider}", query_string=answer, **where)


# -- OpenID Connect -----------------------------------------------------------------------------

Tamper = Callable[[dict[str, Any], dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]

WELL_KNOWN = "/.well-known/openid-configuration"


@dataclass
class Outcome:
    """What the app's hooks and signals saw."""

    infos: list[OAuth2Info] = field(default_factory=list)
    profiles: list[SocialProfile] = field(default_factory=list)
    errors: list[AuthenticationError] = field(default_factory=list)

    @property
    def error(self) -> AuthenticationError:
        assert len(self.errors) == 1, self.errors
        return self.errors[0]


def watch(app: Flask) -> Outcome:
    """Record the app's successful sign-ins (through ``on_authenticated``) and failures (through
    the ``authentication_failed`` signal, so that the built-in error page still answers)."""
    outcome = Outcome()
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @social.on_authenticated
    def done(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> Any:
        outcome.infos.append(info)
        outcome.profiles.append(profile)
        return app.redirect("/")

    def failed(sender: Flask, provider_name: str, error: AuthenticationError) -> None:
        outcome.errors.append(error)

    authentication_failed.connect(failed, app, weak=False)
    return outcome


def signed_in_info(app: Flask) -> OAuth2Info:
    """Sign in with the app's ``local`` provider (the ``idp`` fixture); the token it gave."""
    outcome = watch(app)
    assert sign_in(app.test_client()).status_code == 302
    (info,) = outcome.infos
    return info


def token_strings(infos: list[OAuth2Info]) -> list[str]:
    """The access, refresh and ID tokens of ``infos``."""
    found: list[str] = []
    for info in infos:
        found.append(info.access_token)
        if info.refresh_token:
            found.append(info.refresh_token)
        if isinstance(info.params.get("id_token"), str):
            found.append(info.params["id_token"])
    assert found
    return found


def assert_not_logged(records: list[logging.LogRecord], secrets: list[str]) -> None:
    for record in records:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        for secret in secrets:
            assert secret not in text, f"a token appears in the log: {record.name}"


def discovery_block(server: LocalIdentityProvider, **custom: str) -> dict[str, Any]:
    """A block with only the required keys, a scope and ``customProperties.issuer``."""
    return {
        "accessTokenURL": server.token_url,
        "redirectURL": "/authenticate/local",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email",
        "customProperties": {"issuer": server.issuer, **custom},
    }


def with_query(url: str, **changes: str | None) -> str:
    """``url`` with query parameters replaced (or removed, for ``None``)."""
    query = query_of(url)
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = value
    return f"{urlsplit(url).path}?{urlencode(query)}"


def local_provider(app: Flask, name: str = "local") -> OAuth2Provider:
    provider = app.extensions["social_oauth2"].providers[name]
    assert isinstance(provider, OAuth2Provider)
    return provider


def fake_document(issuer: str, **changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "userinfo_endpoint": f"{issuer}/userinfo",
        "jwks_uri": f"{issuer}/jwks",
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
    }
    document.update(changes)
    return {key: value for key, value in document.items() if value is not None}


def fake_app(
    make_app: MakeApp,
    server: FaultServer,
    classes: dict[str, str] | None = None,
    app_config: dict[str, Any] | None = None,
    **changes: Any,
) -> Flask:
    """An app with one provider, ``fake``, whose issuer is ``server``; ``changes`` change its
    block, ``app_config`` adds to the app's config."""
    block: dict[str, Any] = {
        "accessTokenURL": f"{server.url}/token",
        "redirectURL": "/authenticate/fake",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email",
        "customProperties": {"issuer": server.url},
    }
    block.update(changes)
    return make_app(
        {"fake": block},
        SOCIAL_OAUTH2_TIMEOUT=1,
        SOCIAL_OAUTH2_PROVIDER_CLASSES=classes or {},
        **(app_config or {}),
    )


class Clock:
    """A monotonic clock a test moves by hand (``offset`` seconds ahead of the real one), for
    the discovery caches instead of sleeping."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


class FakeOpenIDProvider:
    """Discovery, keys and token answers of an OpenID provider, served by the fault server."""

    def __init__(self, server: FaultServer, *keys: RSAKey | ECKey, userinfo: bool = True) -> None:
        self.server = server
        self.issuer = server.url
        document = fake_document(server.url)
        if not userinfo:
            del document["userinfo_endpoint"]
        server.set(WELL_KNOWN, Behaviour.json(document))
        self.serve_keys(*keys)

    def serve_keys(self, *keys: RSAKey | ECKey) -> None:
        self.server.set(
            "/jwks", Behaviour.json({"keys": [key.as_dict(private=False) for key in keys]})
        )

    def claims(self, **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": "user-1",
            "aud": CLIENT_ID,
            "exp": now + 300,
            "iat": now,
            "name": "Ada Lovelace",
            "given_name": "Ada",
            "family_name": "Lovelace",
            "email": "ada@example.test",
        }
        claims.update(changes)
        return {key: value for key, value in claims.items() if value is not None}

    def serve_token(self, id_token: object, **fields: Any) -> None:
        answer: dict[str, Any] = {"access_token": "fake-access-token", "token_type": "Bearer"}
        if id_token is not None:
            answer["id_token"] = id_token
        answer.update(fields)
        self.server.set("/token", Behaviour.json(answer))


def signed(key: Any, alg: str, claims: dict[str, Any], **header: Any) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # joserfc warns about an HMAC key that is a public key
        kid = getattr(key, "kid", None)
        full_header = {"alg": alg, **({"kid": kid} if kid else {}), **header}
        return jwt.encode(full_header, claims, key, algorithms=[alg])


#: Two Microsoft Entra-style tenant ids (GUIDs), for the multi-tenant identity provider.
TENANT_A: Final = "0b1e2f6c-5a4d-4c3b-9a21-1f2e3d4c5b6a"
TENANT_B: Final = "7d8e9f00-1a2b-4c3d-8e4f-5a6b7c8d9e0f"


class MultiTenantIdentityProvider(LocalIdentityProvider):
    """The local identity provider as Microsoft Entra's multi-tenant endpoints: the discovery
    document, served below each tenant segment (``/common/v2.0/.well-known/...``,
    ``/organizations/v2.0/...``), names the issuer ``<url>/{tenantid}/v2.0``, and each ID token
    carries the signed-in user's tenant (:attr:`tenant`) as ``tid``, and ``iss`` filled with it.
    """

    def __init__(self) -> None:
        super().__init__()
        #: The ``tid`` of the next sign-ins (the user's organisation).
        self.tenant = TENANT_A
        self.app.add_url_rule(
            "/<segment>/v2.0/.well-known/openid-configuration",
            "tenant_discovery",
            lambda segment: self.app.response_class(
                json.dumps(self.metadata()), mimetype="application/json"
            ),
        )
        self.id_token_tamper = self._with_tenant

    def issuer_of(self, segment: str) -> str:
        """The issuer a block configures for a tenant segment (``common``, a tenant id, ...)."""
        return f"{self.url}/{segment}/v2.0"

    def metadata(self) -> dict[str, Any]:
        document = super().metadata()
        document["issuer"] = self.issuer_of("{tenantid}")
        return document

    def _with_tenant(
        self, header: dict[str, Any], claims: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return header, {**claims, "tid": self.tenant, "iss": self.issuer_of(self.tenant)}


def multi_tenant_block(
    server: MultiTenantIdentityProvider, segment: str = "common", **custom: str
) -> dict[str, Any]:
    """A block ``entra`` for ``server``'s multi-tenant endpoint ``segment``: the token address,
    the issuer (the rest is discovered) and ``custom`` in ``customProperties``."""
    return {
        "accessTokenURL": server.token_url,
        "redirectURL": "/authenticate/entra",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email",
        "customProperties": {"issuer": server.issuer_of(segment), **custom},
    }


def start_fake(client: Any) -> dict[str, str]:
    started = client.get("/authenticate/fake")
    assert started.status_code == 302, started.text
    return query_of(started.headers["Location"])


def finish_fake(client: Any, state: str) -> Any:
    return client.get("/authenticate/fake", query_string={"code": "the-code", "state": state})


#: The event of a back-channel logout token.
LOGOUT_EVENT: Final = "http://schemas.openid.net/event/backchannel-logout"
BACKCHANNEL_PATH: Final = "/authenticate/fake/backchannel-logout"
#: The OpenID Foundation's seven refused logout tokens (its RP back-channel tests), by the
#: names :func:`refused_tokens` gives them.
OIDF_REFUSED: Final = (
    "alg none",
    "no event",
    "wrong event",
    "nonce",
    "wrong alg",
    "wrong aud",
    "wrong issuer",
)


def logout_claims(fake: FakeOpenIDProvider, **changes: Any) -> dict[str, Any]:
    """The claims of a good logout token of ``fake`` for user-1's session sid-1; ``None`` in
    ``changes`` leaves a claim out."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": fake.issuer,
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 120,
        "jti": secrets.token_urlsafe(12),
        "sub": "user-1",
        "sid": "sid-1",
        "events": {LOGOUT_EVENT: {}},
    }
    claims.update(changes)
    return {key: value for key, value in claims.items() if value is not None}


def backchannel_app(make_app: MakeApp, server: FaultServer, store: str, **custom: str) -> Flask:
    """An app with ``fake`` (see :func:`fake_app`) turned on for back-channel logout, the SQL
    token store ``store``, sessions checked on every request, and ``GET /me`` naming this
    browser's identities."""
    app = fake_app(
        make_app,
        server,
        app_config={"SOCIAL_OAUTH2_TOKEN_STORE": store, "SOCIAL_OAUTH2_SESSION_CHECK_SECONDS": 0},
        customProperties={"issuer": server.url, "backchannelLogout": "true", **custom},
    )

    @app.get("/me")
    def me() -> dict[str, Any]:
        from flask import session

        return {"identities": session.get("social_oauth2_identities") or {}}

    return app


def sign_in_fake(client: Any, fake: FakeOpenIDProvider, key: Any, alg: str = "RS256") -> None:
    """Sign in with ``fake`` as user-1 in provider session sid-1, with an ID token signed by
    ``key``."""
    query = start_fake(client)
    fake.serve_token(signed(key, alg, fake.claims(nonce=query["nonce"], sid="sid-1")))
    answer = finish_fake(client, query["state"])
    assert answer.status_code == 302, answer.text


def segment(part: dict[str, Any]) -> str:
    """One part of a JWT in compact form."""
    return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()


def refused_tokens(fake: FakeOpenIDProvider, rsa_key: RSAKey, ec_key: ECKey) -> dict[str, Any]:
    """Every kind of bad logout token, with the words of its refusal."""
    claims = logout_claims(fake)
    unsigned = f"{segment({'alg': 'none'})}.{segment(claims)}."
    signing_input = f"{segment({'alg': 'HS256', 'kid': 'rsa-1'})}.{segment(claims)}"
    mac = hmac.new(rsa_key.as_pem(private=False), signing_input.encode(), hashlib.sha256)
    hmac_token = f"{signing_input}.{base64.urlsafe_b64encode(mac.digest()).rstrip(b'=').decode()}"
    other_key = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})
    return {
        # the OpenID Foundation's seven refused logout tokens (RP back-channel tests)
        "alg none": (unsigned, "algorithm 'none' is not allowed"),
        "no event": (signed(rsa_key, "RS256", logout_claims(fake, events=None)), "events"),
        "wrong event": (
            signed(rsa_key, "RS256", logout_claims(fake, events={"http://x.example/e": {}})),
            "events",
        ),
        "nonce": (signed(rsa_key, "RS256", logout_claims(fake, nonce="n-1")), "nonce"),
        "wrong alg": (signed(ec_key, "ES256", logout_claims(fake)), "algorithm of the sessions"),
        "wrong aud": (signed(rsa_key, "RS256", logout_claims(fake, aud="other")), "aud"),
        "wrong issuer": (
            signed(rsa_key, "RS256", logout_claims(fake, iss="https://op.example")),
            "iss",
        ),
        # and the rest of section 2.6 and of the bad input
        "not a JWT": ("garbage", "not a signed JWT"),
        "encrypted": ("a.b.c.d.e", "not a signed JWT"),
        "HMAC": (hmac_token, "algorithm 'HS256' is not allowed"),
        "other key": (signed(other_key, "RS256", claims), "signature is not valid"),
        "expired": (
            signed(
                rsa_key,
                "RS256",
                logout_claims(fake, iat=claims["iat"] - 900, exp=claims["iat"] - 600),
            ),
            "expired",
        ),
        "old without exp": (
            signed(rsa_key, "RS256", logout_claims(fake, iat=claims["iat"] - 900, exp=None)),
            "too old",
        ),
        "in the future": (
            signed(rsa_key, "RS256", logout_claims(fake, iat=claims["iat"] + 900)),
            "future",
        ),
        "no iat": (signed(rsa_key, "RS256", logout_claims(fake, iat=None)), "no iat"),
        "no jti": (signed(rsa_key, "RS256", logout_claims(fake, jti=None)), "no jti"),
        "event not an object": (
            signed(rsa_key, "RS256", logout_claims(fake, events={LOGOUT_EVENT: "yes"})),
            "JSON object",
        ),
        "no sub nor sid": (
            signed(rsa_key, "RS256", logout_claims(fake, sub=None, sid=None)),
            "neither sub nor sid",
        ),
        "sub not a string": (signed(rsa_key, "RS256", logout_claims(fake, sub=7)), "'sub'"),
        "iat not a number": (
            signed(rsa_key, "RS256", logout_claims(fake, iat=str(claims["iat"]))),
            "claim 'iat' is not valid",
        ),
        "too long": ("a" * (16 * 1024 + 1), "missing or too long"),
        "aud list without us": (
            signed(rsa_key, "RS256", logout_claims(fake, aud=["a", "b"])),
            "aud",
        ),
    }


def in_threads(work: Callable[[int], None], count: int) -> None:
    """Run ``work(0)`` to ``work(count - 1)`` at once, one thread each, and wait for all;
    the first failure in any of them is raised here."""
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            work(index)
        except BaseException as failed:
            failures.append(failed)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def stop_process(process: subprocess.Popen[Any], grace: float = 10) -> None:
    """Stop a child process, waiting at most ``grace`` seconds for each step: Ctrl-C
    (SIGINT, so that it can clean up), then SIGTERM, then SIGKILL. A child that ignores the
    first two still ends, and the caller never hangs in :meth:`subprocess.Popen.wait`."""
    steps: list[Callable[[], None]] = [
        lambda: process.send_signal(signal.SIGINT),
        process.terminate,
        process.kill,
    ]
    for step in steps:
        if process.poll() is not None:
            return
        step()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        return


@contextmanager
def child_process(
    args: Sequence[str], grace: float = 10, **popen: Any
) -> Iterator[subprocess.Popen[str]]:
    """Run ``args`` (text mode) for the ``with`` block; stopped with :func:`stop_process` on
    every way out, an interrupted test run included, and its pipes closed."""
    with subprocess.Popen(args, text=True, **popen) as process:
        try:
            yield process
        finally:
            stop_process(process, grace)


def run_flask(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m flask ARGS`` in a real process started in ``cwd``, as a user runs it (the
    test run's ``FLASK_*`` environment variables left out)."""
    environ = {key: value for key, value in os.environ.items() if not key.startswith("FLASK_")}
    return subprocess.run(
        [sys.executable, "-m", "flask", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_port(
    port: int,
    *,
    listening: bool = True,
    timeout: float = 30,
    process: subprocess.Popen[Any] | None = None,
    details: Callable[[], str] = str,
) -> None:
    """Wait until something listens on 127.0.0.1:``port`` (or, with ``listening=False``, until
    nothing does any more: a connection is refused), else raise :class:`RuntimeError` after
    ``timeout`` seconds, or at once when ``process`` (the one that should listen) has exited.

    :param details: What to add to the error (e.g. the tail of the process's log).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and listening and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}:\n{details()}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
        except ConnectionRefusedError:
            if not listening:
                return
        except OSError:
            pass
        else:
            if listening:
                return
        time.sleep(0.02)
    state = "nothing listens on" if listening else "something still listens on"
    raise RuntimeError(f"{state} port {port} after {timeout:g} s:\n{details()}")


@functools.cache
def _apple_private_key() -> str:
    pem: bytes = ECKey.generate_key("P-256", private=True).as_pem(private=True)
    return pem.decode("ascii")


#: Environment variables whose value must have a shape (Apple's ids and key, Bluesky's
#: client metadata URL and key).
_SHAPED_VARIABLES: Final[dict[str, Callable[[], str]]] = {
    "APPLE_TEAM_ID": lambda: "ABCDE12345",
    "APPLE_KEY_ID": lambda: "FGHIJ67890",
    "APPLE_PRIVATE_KEY": _apple_private_key,
    "BLUESKY_CLIENT_ID": lambda: (
        "https://app.example.com/authenticate/bluesky/client-metadata.json"
    ),
    "BLUESKY_PRIVATE_KEY": _apple_private_key,
}


def example_value(variable: str, default: str) -> str:
    """A value for the environment variable ``variable`` of a generated block: one of the right
    shape where the provider checks it (Apple's team id, key id and ``.p8`` key), else
    ``default``."""
    shaped = _SHAPED_VARIABLES.get(variable)
    return shaped() if shaped is not None else default


def example_yaml_value(variable: str, default: str) -> str:
    """:func:`example_value` as a YAML scalar (a key's line breaks double-quoted)."""
    value = example_value(variable, default)
    return json.dumps(value) if "\n" in value else value


def state_cookie_name(app: Flask, *, secure: bool = False) -> str:
    """The app's state cookie name: scoped to the app, ``__Host-`` prefixed on https."""
    name: str = app.extensions["social_oauth2"].state_cookies.cookie_name(secure)
    return name


def browser_code(server: LocalIdentityProvider, verifier: str, **params: str) -> str:
    """What a client-side framework does in the browser: send the authorization request with
    the S256 challenge of ``verifier`` to ``server`` (auto-approving); the code it returns."""
    from flask_social_oauth2.oauth.flow import code_challenge

    query = {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": LOCAL_REDIRECT,
        "scope": "openid profile email",
        "state": "checked-by-the-browser-app",
        "code_challenge": code_challenge(verifier),
        "code_challenge_method": "S256",
        **params,
    }
    answer = requests.get(server.authorization_url, params=query, allow_redirects=False, timeout=10)
    assert answer.status_code in (302, 303), answer.text
    return query_of(answer.headers["Location"])["code"]


# -- token stores -----------------------------------------------------------------------------


def make_token(*, expired: bool = False, lifetime: int = 3600, **params: str) -> OAuth2Info:
    """A fresh token; ``expired`` makes it due for a refresh."""
    now = time.time()
    return OAuth2Info(
        access_token="at-" + secrets.token_urlsafe(16),
        token_type="Bearer",
        expires_in=lifetime,
        refresh_token="rt-" + secrets.token_urlsafe(16),
        params={"id_token": "idt-" + secrets.token_urlsafe(16), **params},
        expires_at=now - 1 if expired else now + lifetime,
    )


@dataclass
class RotatingRenewer:
    """A provider's refresh endpoint that rotates refresh tokens and refuses a used one
    (``invalid_grant``), counting the renewals it was asked for."""

    valid_refresh_token: str
    delay: float = 0.05
    calls: int = 0
    issued: list[OAuth2Info] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, info: OAuth2Info) -> OAuth2Info:
        with self._lock:
            self.calls += 1
            if info.refresh_token != self.valid_refresh_token:
                raise SignInRequiredError("local", "the provider refused the refresh")
        time.sleep(self.delay)  # widen the window in which a second renewal could start
        renewed = make_token()
        with self._lock:
            self.valid_refresh_token = renewed.refresh_token or ""
            self.issued.append(renewed)
        return renewed


def kept(info: OAuth2Info | None) -> tuple[object, ...] | None:
    """What a store keeps of ``info`` (never the ID token), for comparing tokens."""
    if info is None:
        return None
    return (
        info.access_token,
        info.token_type,
        info.refresh_token,
        info.expires_in,
        info.expires_at,
    )


@contextmanager
def live_server(app: Flask) -> Iterator[str]:
    """Serve ``app`` over real HTTP (werkzeug's threaded server) on ``127.0.0.1`` and a free
    port, for servers that fetch from it (the AT Protocol PDS reading a client metadata
    document); yields its base URL and stops the server on every way out."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="live-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


class PageForm(HTMLParser):
    """The first form of a page: its action and hidden fields; and every script's nonce."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self.script_nonces: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = found.get("action")
        elif tag == "input" and found.get("type") == "hidden":
            self.fields[found["name"] or ""] = found.get("value") or ""
        elif tag == "script":
            self.script_nonces.append(found.get("nonce"))


def parse_form(page: str) -> PageForm:
    """The first form of the HTML ``page`` (a provider's form-post page, the app's hop page)."""
    forms = PageForm()
    forms.feed(page)
    return forms


def record_cookies_set(page: Any, prefix: str) -> list[str]:
    """Every ``Set-Cookie`` value for a cookie whose name starts with ``prefix`` that the
    Playwright ``page`` receives from now on (the list fills as the page browses)."""
    values: list[str] = []

    def cookies_set(answer: Any) -> None:
        for header in answer.headers_array():
            if header["name"].lower() == "set-cookie" and header["value"].startswith(prefix):
                values.append(header["value"])

    page.on("response", cookies_set)
    return values


# -- ID tokens posted by the browser (Google Identity Services) ---------------------------------

#: The value the stand-in for Google's script puts in the ``g_csrf_token`` cookie and field.
CSRF_PAIR = "double-submit-pair-value"


class LocalGoogle(FakeOpenIDProvider):
    """A stand-in for Google's issuer on loopback: its discovery document and key set, served by
    the fault server, and ID tokens shaped like those Google's sign-in hands a page (``azp``,
    ``hd``, ``email_verified``, ``picture``, the page's ``nonce``), signed with ``key``."""

    def __init__(self, server: FaultServer, key: RSAKey) -> None:
        super().__init__(server, key)
        self.key = key

    def credential(self, nonce: str | None, **changes: Any) -> str:
        """An ID token for ``nonce``; ``changes`` change (``None``: drop) its claims."""
        google: dict[str, Any] = {
            "azp": CLIENT_ID,
            "hd": "example.test",
            "email": "ada@example.test",
            "email_verified": True,
            "picture": "https://lh3.googleusercontent.com/a/ada",
            "nonce": nonce,
            "exp": int(time.time()) + 3600,
        }
        return signed(self.key, "RS256", self.claims(**{**google, **changes}))


def one_tap_block(issuer: str, **custom: str) -> dict[str, Any]:
    """A ``google`` block that takes posted ID tokens, its issuer ``issuer``."""
    return {
        "authorizationURL": "https://accounts.google.com/o/oauth2/v2/auth",
        "accessTokenURL": "https://oauth2.googleapis.com/token",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "redirectURL": "/authenticate/google",
        "scope": "openid email profile",
        "customProperties": {"issuer": issuer, "idTokenSignIn": "true", **custom},
    }


def one_tap_app(make_app: MakeApp, google: LocalGoogle, **custom: str) -> Flask:
    """An app with :func:`one_tap_block`; ``GET /nonce?next=...`` answers a nonce for this
    browser, ``GET /api`` the name of the error ``social.api("google")`` raises (or ``ok``)."""
    from flask import request

    app = make_app({"google": one_tap_block(google.issuer, **custom)})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @app.get("/nonce")
    def nonce() -> str:
        return social.id_token_nonce("google", next=request.args.get("next"))

    @app.get("/api")
    def api() -> str:
        try:
            social.api("google")
        except AuthenticationError as error:
            return type(error).__name__
        return "ok"

    return app


def post_credential(
    client: Any, credential: str, *, field: str | None = CSRF_PAIR, cookie: str | None = CSRF_PAIR
) -> Any:
    """POST ``credential`` as Google's script does: the ``g_csrf_token`` cookie (``None``: none)
    and form field (``None``: none)."""
    if cookie is None:
        client.delete_cookie("g_csrf_token")
    else:
        client.set_cookie("g_csrf_token", cookie)
    form = {"credential": credential}
    if field is not None:
        form["g_csrf_token"] = field
    return client.post("/authenticate/google", data=form)
