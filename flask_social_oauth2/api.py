"""Calling a provider's API after sign-in: :class:`ProviderSession`, an
:class:`~requests_oauthlib.OAuth2Session` for one stored identity.

The session attaches the identity's token itself, refreshing it through the token store first
when it is due, and sends with the extension's HTTP rules. It never uses requests-oauthlib's own
token handling: that refreshes outside the store's lock, logs tokens at DEBUG and needs
oauthlib's process-wide insecure-transport switch for plain http.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import requests
from flask import Flask, current_app
from requests_oauthlib import OAuth2Session

from . import signals
from .config.settings import OAuth2Info
from .errors import SignInRequiredError, UnexpectedResponseError
from .oauth import dpop
from .oauth.http_client import get_client
from .oauth.revocation import API_BASE_URL_KEY
from .providers.base import BuiltinProvider
from .providers.oauth2 import OAuth2Provider
from .runtime import current_runtime
from .tokens.store import TokenStore, refresh_due
from .urls import check_endpoint_url

logger = logging.getLogger("flask_social_oauth2")

_STEP = "API request"


class ProviderSession(OAuth2Session):  # type: ignore[misc]  # requests-oauthlib is untyped
    """A session for one identity's calls to its provider's API, made by
    :meth:`SocialOAuth2.api <flask_social_oauth2.SocialOAuth2.api>` for one request or job;
    never keep it longer, nor share it between users.

    Relative URLs are joined to ``customProperties.apiBaseURL`` or the provider's built-in API
    base; absolute URLs are used as given (https, or http for a loopback host). Before each
    call the identity's token is read from the store and, within
    ``SOCIAL_OAUTH2_REFRESH_LEEWAY`` of expiry, refreshed through the store (one refresh at a
    time per identity); :data:`~flask_social_oauth2.signals.token_updated` is then sent.
    Requests use the extension's timeout, body cap and connection pools; no cookie is kept.

    :param provider: The identity's provider.
    :param key: The identity's ``provider_key``.
    :param store: The app's token store; ``None`` when nothing is kept.
    :raises SignInRequiredError: when ``store`` is ``None``.
    """

    def __init__(self, provider: OAuth2Provider, key: str, store: TokenStore | None) -> None:
        if store is None:
            raise SignInRequiredError(
                provider.name, "no tokens are kept (SOCIAL_OAUTH2_TOKEN_STORE is 'none')"
            )
        super().__init__(client_id=provider.settings.client_id)
        self.provider = provider
        self.provider_key = key
        self._store = store
        runtime = current_runtime()
        self._timeout = runtime.timeout
        self._max_bytes = runtime.max_response_bytes
        self._refresh_leeway = runtime.refresh_leeway
        self._app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
        self._http = get_client()
        self._http.configure(self)

    def __repr__(self) -> str:
        return f"<ProviderSession {self.provider.name!r} key={self.provider_key!r}>"

    def close(self) -> None:
        """Nothing to close: the connection pools are the extension's, shared with every other
        session (``requests.Session.close`` would close them for all)."""

    @property
    def api_base(self) -> str | None:
        """``customProperties.apiBaseURL``, else the provider's API base for this identity
        (:meth:`~flask_social_oauth2.OAuth2Provider.api_base_for`; Bluesky: the identity's
        PDS, read from its kept token), or ``None``."""
        return self._api_base(None)

    def _api_base(self, info: OAuth2Info | None) -> str | None:
        configured = self.provider.options.api_base_url
        if configured:
            return configured
        base = self.provider.api_base_for(info)
        if base is None and info is None and self.provider.api_base_per_identity:
            kept = self._store.load(self.provider.name, self.provider_key)
            base = None if kept is None else self.provider.api_base_for(kept)
        return base

    def url_for(self, url: str, info: OAuth2Info | None = None) -> str:
        """``url`` joined to :attr:`api_base` when it is relative; an absolute URL unchanged.

        :param info: The identity's token, when it is at hand (its API base may depend on it).
        :raises ValueError: for a relative URL when the provider has no API base.
        """
        if "://" in url.split("?", 1)[0]:
            return url
        base = self._api_base(info)
        if base is None:
            raise ValueError(
                f"provider {self.provider.name!r} has no API base for a relative URL:"
                f" set customProperties.{API_BASE_URL_KEY} or call an absolute URL"
            )
        return base.rstrip("/") + "/" + url.lstrip("/")

    def request(
        self,
        method: str | bytes,
        url: str | bytes,
        data: Any = None,
        headers: Any = None,
        withhold_token: bool = False,
        client_id: str | None = None,
        client_secret: str | None = None,
        files: Any = None,
        **kwargs: Any,
    ) -> requests.Response:
        """Send a request with the identity's token (none with ``withhold_token``).

        Other keyword arguments are those of :meth:`requests.Session.request`; ``timeout``
        (seconds, or a ``(connect, read)`` pair, also bounding the whole exchange by the
        longer) defaults to ``SOCIAL_OAUTH2_TIMEOUT``, and no answer larger than
        ``SOCIAL_OAUTH2_MAX_RESPONSE_BYTES`` is read. A redirect is not followed: the 3xx
        answer is returned, its ``Location`` to call next. ``client_id`` and ``client_secret``
        are accepted for compatibility and not used.

        :raises ValueError: for a relative URL without an API base, or plain http to a host
            that is not loopback; nothing is sent.
        :raises SignInRequiredError: when the identity has no usable token (none kept, or the
            provider refused the refresh: the dead token is deleted).
        :raises UnexpectedResponseError: when the provider failed during a refresh (the old
            token is kept), or the call itself failed (no answer, a header that cannot be sent,
            an answer over the size cap): 504 for a timeout, 502 otherwise.
        """
        name = self.provider.name
        # one read of the kept token serves both the API base (Bluesky: the identity's PDS)
        # and the call
        kept = None
        if not withhold_token or self.provider.api_base_per_identity:
            kept = self._store.load(name, self.provider_key)
        target = self.url_for(url.decode() if isinstance(url, bytes) else url, kept)
        problem = check_endpoint_url(target)
        if problem is not None:
            raise ValueError(f"provider {name!r}: the API URL {problem}")
        token = None if withhold_token else self._token_for_call(kept)
        key = None if token is None or token.dpop_key is None else dpop.DPoPKey.load(token.dpop_key)
        timeout = kwargs.pop("timeout", None) or self._timeout
        per_read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        kwargs.setdefault("proxies", self._http.proxies_for(target))
        kwargs["stream"] = True  # the body is read below, under the size cap
        method_name = method.decode() if isinstance(method, bytes) else method

        def send(nonce: str | None) -> requests.Response:
            all_headers = dict(headers or {})
            if token is not None:
                all_headers.update(self._authorization(token))
            if token is not None and key is not None:
                all_headers |= dpop.authorization(
                    key, token.access_token, method_name, target, nonce=nonce
                )
            return self._send_once(method, target, data, files, all_headers, per_read, dict(kwargs))

        if key is None:
            return send(None)
        return dpop.send_with_nonce(target, send, _answer_parts)

    def _send_once(
        self,
        method: str | bytes,
        target: str,
        data: Any,
        files: Any,
        all_headers: dict[str, Any],
        per_read: tuple[float, float],
        kwargs: dict[str, Any],
    ) -> requests.Response:
        name = self.provider.name
        self._http.check_headers(
            {key: value for key, value in all_headers.items() if isinstance(value, str)},
            provider=name,
            step=_STEP,
            url=target,
            error=UnexpectedResponseError,
        )
        with self._http.deadline(max(per_read)):
            try:
                response = requests.Session.request(
                    self,
                    method,
                    target,
                    data=data,
                    headers=all_headers,
                    files=files,
                    timeout=per_read,
                    **kwargs,
                )
            except requests.Timeout:
                raise UnexpectedResponseError(name, f"{_STEP} timed out", status_code=504) from None
            except requests.RequestException as error:
                reason = type(error).__name__
                raise UnexpectedResponseError(name, f"{_STEP} failed: {reason}") from None
            response._content = self._http.read_body(
                response,
                provider=name,
                step=_STEP,
                error=UnexpectedResponseError,
                max_bytes=self._max_bytes,
            )
        return response

    def get_redirect_target(self, resp: requests.Response) -> None:
        """No redirect is followed (a 3xx answer is returned as it is): requests would read
        each redirect's body whole, past the size cap."""
        return

    def _token_for_call(self, info: OAuth2Info | None) -> OAuth2Info:
        """The identity's token ``info`` as read from the store, refreshed through the store
        first when it is due.

        :raises SignInRequiredError: see :meth:`request`.
        """
        name, key = self.provider.name, self.provider_key
        if info is None:
            raise SignInRequiredError(name, f"no token is kept for identity {key!r}")
        if not refresh_due(info, leeway=self._refresh_leeway):
            return info
        if info.refresh_token is None and not _expired(info):
            return info  # nothing to renew it with; still good for a little while
        renewed: list[OAuth2Info] = []

        def renew(current: OAuth2Info) -> OAuth2Info:
            fresh = self._renew(current)
            renewed.append(fresh)
            return fresh

        info = self._store.refresh(name, key, renew)
        if renewed:
            signals.token_updated.send(self._app, provider=name, key=key, info=info)
        return info

    def _renew(self, info: OAuth2Info) -> OAuth2Info:
        name = self.provider.name
        if info.refresh_token is None:
            raise SignInRequiredError(name, "the token expired and there is no refresh token")
        try:
            return self.provider.refresh(info)
        except UnexpectedResponseError as error:
            if error.error_code == "invalid_grant":
                raise SignInRequiredError(
                    name, "the provider refused the refresh (invalid_grant)"
                ) from None
            raise

    def _authorization(self, info: OAuth2Info) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {info.access_token}"}
        provider = self.provider
        if isinstance(provider, BuiltinProvider):  # a provider's own scheme and API headers
            headers = provider.api_headers() | headers | provider.authorization(info)
        return headers


def _expired(info: OAuth2Info) -> bool:
    return info.expires_at is not None and info.expires_at <= time.time()


def _answer_parts(response: requests.Response) -> tuple[int, Mapping[str, str], bytes]:
    return response.status_code, response.headers, response.content
