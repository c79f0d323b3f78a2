"""Sign-in with an ID token the browser posts: Google Identity Services (the Sign in with Google
button, One Tap, and FedCM under them), for any OpenID Connect block with
``customProperties.idTokenSignIn: "true"``.

Google's script hands the page an ID token and POSTs it to the block's route (its
``login_uri``) as a form: ``credential`` and ``g_csrf_token``, the latter equal to a cookie of
the same name that the script set (a double-submit pair). The route accepts it only when:

1. the pair matches (else 400, and nothing is verified);
2. the ID token passes the code flow's checks (:func:`~flask_social_oauth2.oidc.id_token.
   verify_id_token`: the provider's key set, the algorithm allow-list, ``iss``, ``aud`` and
   ``azp`` = ``clientID``, ``exp``/``iat`` with the leeway) (else 400);
3. its ``nonce`` is one :func:`issue_nonce` gave this browser, not used yet and not older than
   the state TTL; it is used up now (else 400);
4. ``customProperties.hostedDomains``, when set, names its ``hd`` claim (else 403).

The nonces live in a signed cookie of their own beside the state cookie (same lifetime, path,
``__Host-`` prefix on https, ``HttpOnly``, ``SameSite=Lax``), so a page showing One Tap never
pushes a pending code flow out of the state cookie. Like the state cookie, a cookie captured
together with a credential could be replayed until the nonce expires.

The sign-in keeps no token: :class:`~flask_social_oauth2.OAuth2Info` holds the ID token and an
empty access token, and the profile is read from the verified claims.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Protocol

from flask import Response, after_this_request, current_app, g, request
from itsdangerous import BadData

from ..config.profile_fields import OPENID_FIELDS
from ..config.provider_options import ProviderOptions
from ..config.settings import OAuth2Info, OAuth2Settings, SocialProfile
from ..errors import (
    AccessDeniedError,
    ConfigurationProblem,
    IdTokenError,
    InvalidCallbackError,
    ProfileRetrievalError,
    SocialOAuth2Error,
    StateError,
)
from ..oauth import flow
from ..oidc import discovery, id_token
from . import callback, state_cookie
from .redirects import resolve_redirect_uri, safe_next_path
from .state_cookie import (
    PendingFlow,
    StateCookieStore,
    StateSerializer,
    flow_cookie,
    mark_browser_bound,
)

logger = logging.getLogger("flask_social_oauth2")

#: The ``customProperties`` key that turns the sign-in on (``"true"``; default ``"false"``).
PROPERTY: Final = "idTokenSignIn"
#: The ``customProperties`` key listing the Google Workspace domains (``hd``) allowed,
#: space-separated.
HOSTED_DOMAINS: Final = "hostedDomains"
#: The posted form's ID token field.
CREDENTIAL_FIELD: Final = "credential"
#: The double-submit pair: the form field and the cookie of this name must be equal.
CSRF_FIELD: Final = "g_csrf_token"
#: Longest credential read (Google's ID tokens are about 1 KB; the code flow's cap).
MAX_CREDENTIAL: Final = 16 * 1024
#: Longest ``g_csrf_token`` read.
MAX_CSRF_VALUE: Final = 512
#: Nonces kept per browser at most (oldest dropped first).
MAX_NONCES: Final = 8
_FORM_TYPE: Final = "application/x-www-form-urlencoded"
_SALT_SUFFIX: Final = "/id-token-nonce"
_G_NONCES: Final = "_social_oauth2_id_token_nonces"
_G_WRITE: Final = "_social_oauth2_id_token_nonces_write"
#: What an answer that reads or writes the nonces sets unless it sets its own.
_NONCE_PAGE_HEADERS: Final = MappingProxyType({"Cache-Control": "no-store"})


# -- configuration -------------------------------------------------------------------------------


def settings_problems(
    options: ProviderOptions, *, issuer: str | None
) -> list[ConfigurationProblem]:
    """What the ID-token sign-in keys need beyond their values (checked where the record is
    read): ``idTokenSignIn`` an OpenID Connect issuer to verify the tokens with, and
    ``hostedDomains`` the ID-token sign-in itself.

    :param issuer: The block's issuer (``None`` for plain OAuth 2.0).
    """
    key = f"customProperties.{PROPERTY}"
    problems: list[ConfigurationProblem] = []
    if options.id_token_sign_in and issuer is None:
        problems.append(
            ConfigurationProblem(
                None,
                key,
                "needs an OpenID Connect provider to verify the ID tokens with: a built-in one"
                " with 'openid' in the scope, or customProperties.issuer",
            )
        )
    if options.hosted_domains and not options.id_token_sign_in:
        problems.append(
            ConfigurationProblem(
                None,
                f"customProperties.{HOSTED_DOMAINS}",
                f"applies to the ID-token sign-in only: set {key} true",
            )
        )
    return problems


# -- the nonces ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IssuedNonce:
    """A nonce given to this browser for one provider's ID-token sign-in."""

    provider: str
    nonce: str
    created: int
    #: The same-origin path to go to after the sign-in, if any.
    next_url: str | None = None

    def __repr__(self) -> str:
        return (
            f"IssuedNonce(provider={self.provider!r}, nonce='***', created={self.created!r},"
            f" next_url={self.next_url!r})"
        )

    @classmethod
    def from_list(cls, item: Any) -> IssuedNonce | None:
        """Read a cookie entry, or ``None`` if it is not of the expected shape."""
        if not isinstance(item, list) or len(item) != 4:
            return None
        provider, nonce, created, next_url = item
        if not (
            isinstance(provider, str)
            and isinstance(nonce, str)
            and isinstance(created, int)
            and not isinstance(created, bool)
            and (next_url is None or isinstance(next_url, str))
        ):
            return None
        return cls(provider, nonce, created, next_url)


class NonceCookie:
    """This browser's issued nonces, in a signed cookie named after the state cookie
    (``<state cookie>_nonce``), with its path, lifetime and salt (plus a suffix of its own),
    signed by the app's :class:`StateCookieStore` (which builds the signer once per key set).
    Made for one use from that store; a request's nonces live in :data:`flask.g`."""

    __slots__ = ("_store", "name", "path", "ttl")

    def __init__(self, store: StateCookieStore) -> None:
        self._store = store
        self.name = f"{store.name}_nonce"
        self.path = store.path
        self.ttl = store.ttl

    def _cookie_name(self) -> str:
        return f"__Host-{self.name}" if request.is_secure else self.name

    def _serializer(self) -> StateSerializer:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        return self._store.serializer(app, _SALT_SUFFIX)

    def load(self) -> list[IssuedNonce]:
        """The browser's unexpired nonces (a bad, foreign or expired cookie holds none)."""
        request_g = g._get_current_object()
        found: list[IssuedNonce] | None = request_g.get(_G_NONCES)
        if found is not None:
            return list(found)
        cookies = request.cookies
        name = self._cookie_name()
        # looked for first: a missing cookie's get raises and catches an HTTP exception
        value = cookies[name] if name in cookies else ""  # noqa: SIM401
        items: Any = None
        if value and len(value) <= state_cookie.MAX_COOKIE_VALUE * 2:
            try:
                items = self._serializer().loads(value, max_age=self.ttl)
            except (BadData, ValueError, TypeError, RecursionError):
                items = None
        now = state_cookie.now()
        found = []
        for item in items[:MAX_NONCES] if isinstance(items, list) else []:
            entry = IssuedNonce.from_list(item)
            if entry is not None and now - self.ttl <= entry.created <= now + 60:
                found.append(entry)
        setattr(request_g, _G_NONCES, found)
        return list(found)

    def save(self, entries: list[IssuedNonce]) -> None:
        """Replace the browser's nonces; the cookie is written on the response."""
        setattr(g, _G_NONCES, entries[-MAX_NONCES:])
        self._on_response(write=True)

    def _on_response(self, *, write: bool) -> None:
        """Mark the response: always uncacheable and varying on the cookie (a page holding a
        nonce is this browser's); with ``write``, also set the cookie."""
        request_g = g._get_current_object()
        pending = request_g.get(_G_WRITE)
        if pending is None:
            pending = [False]
            setattr(request_g, _G_WRITE, pending)
            after_this_request(lambda response: self._finish(response, pending[0]))
        pending[0] = pending[0] or write

    def _finish(self, response: Response, write: bool) -> Response:
        headers = response.headers
        if write:
            entries: list[IssuedNonce] = g.get(_G_NONCES) or []
            value = (
                self._serializer().dumps(
                    [[e.provider, e.nonce, e.created, e.next_url] for e in entries]
                )
                if entries
                else ""
            )
            cookie = flow_cookie(
                self._cookie_name(), value, ttl=self.ttl, path=self.path, secure=request.is_secure
            )
            headers.add("Set-Cookie", cookie)
        mark_browser_bound(headers, _NONCE_PAGE_HEADERS)
        return response

    def issue(self, provider: str, next_url: str | None) -> str:
        """A nonce for ``provider``: one this browser holds already for the same ``next_url``
        while it has more than half its lifetime left, else a new one."""
        self._serializer()  # no SECRET_KEY: refused now, not when the response is written
        entries = self.load()
        now = state_cookie.now()
        for entry in reversed(entries):
            fresh = now - entry.created < self.ttl // 2
            if fresh and entry.provider == provider and entry.next_url == next_url:
                self._on_response(write=False)
                return entry.nonce
        entry = IssuedNonce(provider, flow.new_nonce(), now, next_url)
        self.save([*entries, entry])
        return entry.nonce

    def spend(self, provider: str, nonce: object) -> IssuedNonce | None:
        """Use up the nonce ``nonce`` issued to this browser for ``provider``: the entry, now
        removed, or ``None`` when there is none (never issued here, spent, or expired)."""
        if not isinstance(nonce, str) or not nonce:
            return None
        entries = self.load()
        candidate = nonce.encode("utf-8")
        found = None
        for entry in entries:
            if hmac.compare_digest(entry.nonce.encode("utf-8"), candidate):
                found = entry
        if found is None or found.provider != provider:
            return None
        self.save([entry for entry in entries if entry is not found])
        return found


# -- what the page needs -------------------------------------------------------------------------


class Block(Protocol):
    """What the page's markup needs of a provider: any
    :class:`~flask_social_oauth2.OAuth2Provider` is one."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> OAuth2Settings: ...

    @property
    def options(self) -> ProviderOptions: ...


class IdTokenProvider(Block, Protocol):
    """What the ID-token sign-in needs of a provider (:class:`~flask_social_oauth2.
    OAuth2Provider` is one)."""

    @property
    def issuer(self) -> str | None: ...

    @property
    def extra_id_token_issuers(self) -> frozenset[str]: ...

    def openid_source(self) -> discovery.Source: ...


class NonceStores(Protocol):
    """What the sign-in keeps per app: the app's runtime record is one."""

    @property
    def state_cookies(self) -> StateCookieStore: ...


@dataclass(frozen=True, slots=True)
class OneTap:
    """What Google's markup (``g_id_onload``) needs for one block, for this browser."""

    #: ``data-client_id``: the block's ``clientID``.
    client_id: str
    #: ``data-login_uri``: the block's absolute redirect URL, the route that takes the POST.
    login_uri: str
    #: ``data-nonce``: a nonce issued to this browser (see :func:`issue_nonce`).
    nonce: str

    def __repr__(self) -> str:
        return f"OneTap(client_id={self.client_id!r}, login_uri={self.login_uri!r}, nonce='***')"

    def data_attributes(self) -> dict[str, str]:
        """The ``data-`` attributes of the ``g_id_onload`` element (values unescaped),
        FedCM on for the prompt."""
        return {
            "data-client_id": self.client_id,
            "data-login_uri": self.login_uri,
            "data-nonce": self.nonce,
            "data-use_fedcm_for_prompt": "true",
        }


def _checked(provider: Block) -> None:
    if not provider.options.id_token_sign_in:
        raise SocialOAuth2Error(
            f"provider {provider.name!r} does not take ID tokens from the browser: set its"
            f" customProperties.{PROPERTY} to 'true'"
        )


def issue_nonce(provider: Block, stores: NonceStores, next_url: str | None = None) -> str:
    """A nonce for Google's markup (``data-nonce``), bound to this browser (see
    :class:`NonceCookie`). Call it in a request; the response sets the cookie.

    :param next_url: Where to go after the sign-in (a same-origin path; anything else is
        dropped).
    :raises SocialOAuth2Error: when the block has no ``customProperties.idTokenSignIn``.
    """
    _checked(provider)
    return NonceCookie(stores.state_cookies).issue(provider.name, safe_next_path(next_url))


def one_tap(provider: Block, stores: NonceStores, next_url: str | None = None) -> OneTap:
    """Everything Google's markup needs for ``provider``, for this browser: the client id,
    the ``login_uri`` and a nonce (see :func:`issue_nonce`)."""
    nonce = issue_nonce(provider, stores, next_url)
    return OneTap(
        client_id=provider.settings.client_id,
        login_uri=resolve_redirect_uri(provider.settings.redirect_url),
        nonce=nonce,
    )


# -- the POST ------------------------------------------------------------------------------------


def is_posted(options: ProviderOptions) -> bool:
    """Whether the current ``POST`` is a browser's ID token for a block with ``settings``: the
    block takes them and the form carries ``credential`` (a start confirmation or a form-post
    callback carries none)."""
    return (
        options.id_token_sign_in
        and request.mimetype == _FORM_TYPE
        and CREDENTIAL_FIELD in request.form
    )


def finish(provider: IdTokenProvider, stores: NonceStores) -> OAuth2Info:
    """Accept the posted ID token (see the module's checks) and use its nonce up.

    :return: The sign-in's :class:`OAuth2Info`: the ID token and its claims, no access token.
    :raises InvalidCallbackError: 400 for a missing or mismatched ``g_csrf_token`` pair, or a
        missing, repeated or oversized field.
    :raises IdTokenError: 400 for an ID token that fails a check.
    :raises StateError: 400 for a nonce this browser was not issued, or spent.
    :raises AccessDeniedError: 403 for an ``hd`` outside ``hostedDomains``.
    :raises DiscoveryError: when the provider's documents cannot be read (502/504).
    """
    name = provider.name
    credential, posted_pair = callback.single_values(
        request.form,
        (CREDENTIAL_FIELD, CSRF_FIELD),
        name,
        limits={CREDENTIAL_FIELD: MAX_CREDENTIAL, CSRF_FIELD: MAX_CSRF_VALUE},
    )
    cookie_pair = request.cookies.get(CSRF_FIELD, "")
    if not posted_pair or not cookie_pair or len(cookie_pair) > MAX_CSRF_VALUE:
        raise InvalidCallbackError(name, "ID token POST without the g_csrf_token cookie and field")
    if not hmac.compare_digest(posted_pair.encode("utf-8"), cookie_pair.encode("utf-8")):
        raise InvalidCallbackError(name, "ID token POST's g_csrf_token field is not its cookie's")
    if not credential:
        raise InvalidCallbackError(name, "ID token POST with an empty credential")
    claims = _verified_claims(provider, credential)
    issued = NonceCookie(stores.state_cookies).spend(name, claims.get("nonce"))
    if issued is None:
        raise StateError(
            name, "ID token's nonce was not issued to this browser, or was used or has expired"
        )
    allowed = provider.options.hosted_domains
    domain = claims.get("hd")
    if allowed and not (isinstance(domain, str) and domain.lower() in allowed):
        raise AccessDeniedError(name, "ID token's hosted domain (hd) is not in hostedDomains")
    callback.remember_finished(
        PendingFlow(
            state="",
            provider=name,
            redirect_uri="",
            verifier=None,
            next_url=issued.next_url,
            created=issued.created,
        )
    )
    logger.info("%s: ID token from the browser verified", name)
    return OAuth2Info(access_token="", params={"id_token": credential}, id_token_claims=claims)


def _verified_claims(provider: IdTokenProvider, credential: str) -> dict[str, Any]:
    """The claims of ``credential`` verified as in the code flow, without the nonce (checked
    against this browser's next); a failed check is the browser's fault: 400, not 502."""
    issuer = provider.issuer
    if issuer is None:  # settings_problems refuses this block at setup
        raise IdTokenError(provider.name, "the block has no OpenID Connect issuer", status_code=400)
    if credential.count(".") != 2:  # refused before the provider's documents are fetched
        raise IdTokenError(provider.name, "credential is not a signed JWT", status_code=400)
    source = provider.openid_source()
    metadata = discovery.provider_metadata(source, provider.settings, provider.options, issuer)
    try:
        return id_token.verify_id_token(
            source,
            provider.settings,
            provider.options,
            credential,
            metadata,
            nonce=None,
            extra_issuers=provider.extra_id_token_issuers,
        )
    except IdTokenError as error:
        error.status_code = 400  # the browser sent it, not the provider
        raise


def profile(provider: str, info: OAuth2Info) -> SocialProfile:
    """The profile of an ID-token sign-in, read from its verified claims with the OpenID
    Connect claim names.

    :raises ProfileRetrievalError: when the claims have no ``sub``.
    """
    found = OPENID_FIELDS.extract(provider, dict(info.id_token_claims or {}))
    if found is None:
        raise ProfileRetrievalError(provider, "ID token has no user id (sub)")
    return found
