"""Test an app's sign-in without the network: helpers, and the fixture of the pytest plugin.

Installing flask-social-oauth2 registers the pytest plugin ``social_oauth2``
(:mod:`flask_social_oauth2.pytest_plugin`), which offers one fixture, ``social_idp``: a started
:class:`~flask_social_oauth2.local_idp.LocalIdentityProvider`, a real OAuth 2.0 / OpenID
Connect authorization server on loopback. With it an app's own tests run the whole flow::

    from flask_social_oauth2.local_idp import LocalUser
    from flask_social_oauth2.testing import sign_in, use_local_idp


    def test_sign_in(social_idp):
        app = create_app()                       # configures a "github" provider
        use_local_idp(app, "github", social_idp)  # ... now served by the local provider
        client = app.test_client()
        response = sign_in(client, "github", LocalUser.from_name_email("Ada", "ada@example.test"))
        assert response.status_code == 302


    def test_refusal(social_idp):
        ...
        response = sign_in(client, "github", deny="access_denied")
        assert response.status_code == 403

The plugin module imports only pytest; this module is imported when the fixture or a helper
is first used, and the local identity provider (which needs Authlib) only when a helper or
the fixture needs it.
"""

from __future__ import annotations

import http.client
import re
import secrets
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from .errors import UnknownProviderError
from .providers.oauth2 import OAuth2Provider
from .runtime import current_runtime

if TYPE_CHECKING:
    from .local_idp import LocalIdentityProvider, LocalUser, TokenFailure

__all__ = [
    "DEFAULT_HOSTS",
    "DEFAULT_SCOPE",
    "local_idp",
    "local_idp_block",
    "require_local_idp",
    "sign_in",
    "use_local_idp",
]

#: The scope a provider pointed at the local identity provider asks for.
DEFAULT_SCOPE: Final = "openid profile email"
#: Hosts a relative ``redirectURL`` is registered for at the local identity provider: Flask's
#: test client uses ``localhost``; ``127.0.0.1`` for live servers.
DEFAULT_HOSTS: Final = ("localhost", "127.0.0.1")
_TIMEOUT: Final = 10

_registry_lock = threading.Lock()
#: Origin (``http://127.0.0.1:PORT``) -> provider started by :func:`local_idp`.
_running: dict[str, LocalIdentityProvider] = {}
#: One flow at a time per identity provider, since ``auto_approve`` is shared.
_flow_locks: dict[int, threading.Lock] = {}


def require_local_idp() -> ModuleType:
    """Import the local identity provider.

    :return: :mod:`flask_social_oauth2.local_idp`.
    :raises ImportError: naming the ``idp`` extra to install when Authlib is missing.
    """
    from . import local_idp as module

    return module


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


@contextmanager
def local_idp(
    host: str = "127.0.0.1", port: int = 0, **options: Any
) -> Iterator[LocalIdentityProvider]:
    """Start a local identity provider for the ``with`` block; :func:`sign_in` finds it by its
    address.

    :param host: A loopback address.
    :param port: The port, ``0`` for a free one.
    :param options: Further keyword arguments of
        :class:`~flask_social_oauth2.local_idp.LocalIdentityProvider` (``code_ttl``,
        ``iss_parameter``, ...).
    :raises ImportError: with an install hint when Authlib is missing.
    """
    module = require_local_idp()
    provider: LocalIdentityProvider = module.LocalIdentityProvider(host, port, **options)
    with provider:
        origin = _origin(provider.url)
        with _registry_lock:
            _running[origin] = provider
        try:
            yield provider
        finally:
            with _registry_lock:
                if _running.get(origin) is provider:
                    del _running[origin]
                _flow_locks.pop(id(provider), None)


def _redirect_uris(redirect_url: str, hosts: Iterable[str]) -> list[str]:
    if not redirect_url.startswith("/"):
        return [redirect_url]
    return [f"{scheme}://{host}{redirect_url}" for host in hosts for scheme in ("http", "https")]


def local_idp_block(
    idp: LocalIdentityProvider,
    name: str = "local",
    *,
    redirect_url: str | None = None,
    client_id: str | None = None,
    client_secret: str | None = None,
    scope: str = DEFAULT_SCOPE,
    hosts: Iterable[str] = DEFAULT_HOSTS,
) -> dict[str, str]:
    """Register a client at ``idp`` and return the provider block that uses it, for an app's
    configuration (``SOCIAL_OAUTH2_PROVIDERS[name]``).

    :param idp: A started local identity provider.
    :param name: The provider's name; the default ``redirectURL`` and client id derive from it.
    :param redirect_url: The block's ``redirectURL``; default ``/authenticate/<name>``.
    :param client_id: Default ``<name>-client``.
    :param client_secret: Default a fresh random value.
    :param scope: The scope asked for; the client may get any of ``openid profile email``.
    :param hosts: ``HOST[:PORT]`` values a relative ``redirectURL`` is registered for, over
        http and https.
    """
    redirect_url = redirect_url or f"/authenticate/{name}"
    client_id = client_id or f"{name}-client"
    client_secret = client_secret or secrets.token_urlsafe(24)
    idp.register_client(
        client_id,
        client_secret,
        _redirect_uris(redirect_url, hosts),
        token_endpoint_auth_method="any",  # noqa: S106 - a method name
        scope=" ".join(dict.fromkeys([*DEFAULT_SCOPE.split(), *scope.split()])),
    )
    return idp.settings_block(client_id, client_secret, redirect_url, scope)


def use_local_idp(
    app: Flask,
    name: str,
    idp: LocalIdentityProvider,
    *,
    client_id: str | None = None,
    client_secret: str | None = None,
    scope: str = DEFAULT_SCOPE,
) -> OAuth2Provider:
    """Point the app's configured provider ``name`` at ``idp``, for this app only.

    The provider keeps its name and ``redirectURL``; its addresses, client and scope become
    the local identity provider's, and it becomes the generic
    :class:`~flask_social_oauth2.OAuth2Provider`, since the local provider speaks OpenID
    Connect (a built-in class such as GitHub's reads another profile format; this package's
    own tests cover those). ``authorizationParams`` and ``accessTokenParams`` are kept,
    ``customProperties`` dropped.

    :return: The new provider, now in the app's registry.
    :raises UnknownProviderError: when the app has no provider ``name``.
    """
    state = current_runtime(app)
    current = state.providers.get(name)
    if current is None:
        raise UnknownProviderError(name, list(state.providers))
    hosts = list(DEFAULT_HOSTS)
    for entry in [app.config.get("SERVER_NAME"), *(app.config.get("TRUSTED_HOSTS") or ())]:
        if entry and not entry.startswith(".") and entry not in hosts:
            hosts.append(entry)
    block = local_idp_block(
        idp,
        name,
        redirect_url=current.settings.redirect_url,
        client_id=client_id,
        client_secret=client_secret,
        scope=scope,
        hosts=hosts,
    )
    settings = current.settings.replace(
        authorization_url=block["authorizationURL"],
        access_token_url=block["accessTokenURL"],
        api_url=block["apiURL"],
        client_id=block["clientID"],
        client_secret=block["clientSecret"],
        scope=scope,
        custom_properties={},
    )
    provider = OAuth2Provider(name, settings)
    state.providers = MappingProxyType({**state.providers, name: provider})
    return provider


def _find_idp(location: str) -> LocalIdentityProvider | None:
    with _registry_lock:
        return _running.get(_origin(location))


def _flow_lock(idp: LocalIdentityProvider) -> threading.Lock:
    with _registry_lock:
        return _flow_locks.setdefault(id(idp), threading.Lock())


def _get(url: str) -> tuple[int, str | None, str]:
    """A plain GET to the loopback identity provider: status, Location, body."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=_TIMEOUT)
    try:
        connection.request("GET", f"{parts.path}?{parts.query}")
        answer = connection.getresponse()
        body = answer.read(65536).decode("utf-8", "replace")
        return answer.status, answer.getheader("Location"), body
    finally:
        connection.close()


def _page_text(body: str) -> str:
    error = re.search(r'class="error"[^>]*>(.*?)</p>', body, re.S)
    text = re.sub(r"<[^>]+>", " ", error.group(1) if error else body)
    return " ".join(text.split())[:300]


def sign_in(
    client: FlaskClient,
    provider: str = "local",
    user: LocalUser | None = None,
    *,
    idp: LocalIdentityProvider | None = None,
    next: str | None = None,
    deny: str | None = None,
    token_failure: TokenFailure | None = None,
    follow_redirects: bool = False,
) -> TestResponse:
    """Run a whole sign-in with the app's test client against a local identity provider.

    The client starts the flow at the authenticate route, the identity provider approves it
    for ``user`` (or refuses it), and the client sends the callback with its cookies: the
    extension's state, PKCE and token checks all run.

    :param client: The app's test client; it keeps the cookies, so a second request sees the
        signed-in session.
    :param provider: The provider's name; it must point at a local identity provider
        (:func:`use_local_idp`, :func:`local_idp_block`).
    :param user: Who signs in; default "Test User <test.user@example.test>".
    :param idp: The identity provider; default the one :func:`local_idp` (or the
        ``social_idp`` fixture) started at the address the flow is sent to.
    :param next: The ``next`` path to return to after the sign-in.
    :param deny: Make the identity provider refuse with this ``error`` code (e.g.
        ``"access_denied"``, ``"server_error"``).
    :param token_failure: Make the token request fail this way (``"invalid_grant"``,
        ``"server_error"``, ``"html"``, ``"no_access_token"``, ``"error_in_200"``).
    :param follow_redirects: Follow the app's redirect after the callback.
    :return: The app's response to the callback (with the default success handler, a redirect
        to ``next``; for a failure, the error page).
    :raises AssertionError: when the app or the identity provider does not redirect as a
        sign-in should; the message says what came instead.
    """
    if deny is not None and token_failure is not None:
        raise ValueError("give deny or token_failure, not both: a refused flow has no token")
    module = require_local_idp()
    if user is None:
        user = module.LocalUser.from_name_email("Test User", "test.user@example.test")
    app = client.application
    path = app.url_map.bind("localhost").build(
        current_runtime(app).endpoint, {"provider": provider, "next": next}
    )
    started = client.get(path)
    location = started.headers.get("Location")
    if started.status_code not in (302, 303) or not location:
        raise AssertionError(
            f"GET {path} answered HTTP {started.status_code}, not a redirect to the provider:"
            f" {_page_text(started.get_data(as_text=True))}"
        )
    idp = idp or _find_idp(location)
    if idp is None:
        raise AssertionError(
            f"provider {provider!r} sends the browser to {_origin(location)}, where no local"
            " identity provider started by flask_social_oauth2.testing runs: point it at one"
            " with use_local_idp() or local_idp_block(), or pass idp="
        )
    with _flow_lock(idp):
        previous = idp.auto_approve
        idp.auto_approve = user
        try:
            if deny is not None:
                idp.deny_next(deny)
            status, callback, body = _get(location)
        finally:
            idp.auto_approve = previous
        if status not in (302, 303) or not callback:
            raise AssertionError(
                f"the local identity provider answered HTTP {status}, not a redirect back to"
                f" the app: {_page_text(body)}"
            )
        if token_failure is not None:
            idp.fail_next_token(token_failure)
        parts = urlsplit(callback)
        return client.get(
            f"{parts.path}?{parts.query}",
            base_url=f"{parts.scheme}://{parts.netloc}",
            follow_redirects=follow_redirects,
        )
