"""Providers: the authorization code flow for one settings record.

:class:`SocialProvider` is the interface the specification names; :class:`OAuth2Provider` runs
the flow and reads a profile. Built-in providers (``flask_social_oauth2.providers``) subclass
it and state only their default profile address, their profile mapping and their real quirks.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, Literal, Self

from flask import Response, current_app, g, request

from . import flow, state_cookie
from .app_state import get_app_state
from .errors import (
    AccessDeniedError,
    AuthenticationError,
    ConfigurationError,
    ConfigurationProblem,
    InvalidCallbackError,
    ProfileRetrievalError,
    ProviderRefusedError,
    StateError,
    UnexpectedResponseError,
)
from .http_client import ProviderResponse, get_client
from .profile_fields import OPENID_FIELDS, ProfileFields
from .redirects import resolve_redirect_uri, safe_next_path
from .settings import OAuth2Info, OAuth2Settings, SocialProfile
from .state_cookie import PendingFlow

logger = logging.getLogger("flask_social_oauth2")

#: Longest ``code``, ``state``, ``error`` or ``iss`` accepted in a callback.
MAX_CALLBACK_VALUE: Final = 2048
_CALLBACK_PARAMS: Final = ("code", "state", "error", "iss")
_G_FINISHED: Final = "_social_oauth2_finished"

TokenAuthMethod = Literal["client_secret_post", "client_secret_basic"]


class SocialProvider(ABC):
    """A configured social sign-in provider.

    A provider is immutable: :meth:`with_settings` derives a new one, and nothing about a
    request is ever stored on it, so one instance serves all threads.

    :param name: The name of the provider's configuration block.
    :param settings: Its settings record.
    """

    __slots__ = ("_name", "_settings")

    def __init__(self, name: str, settings: OAuth2Settings) -> None:
        self._name = name
        self._settings = settings

    @property
    def name(self) -> str:
        """The name of the provider's configuration block, e.g. ``"github"``."""
        return self._name

    @property
    def settings(self) -> OAuth2Settings:
        """The provider's settings record."""
        return self._settings

    def with_settings(self, change: Callable[[OAuth2Settings], OAuth2Settings]) -> Self:
        """A provider of the same class using the settings ``change`` returns, for one use.

        The provider this is called on, the app's registry and the global configuration are
        unchanged. Usually ``change`` copies the settings with :meth:`OAuth2Settings.replace`::

            provider.with_settings(lambda s: s.replace(scope="repo")).authenticate()

        :raises TypeError: when ``change`` does not return an :class:`OAuth2Settings`.
        :raises ConfigurationError: when the new settings do not suit this provider.
        """
        settings = change(self._settings)
        if not isinstance(settings, OAuth2Settings):
            raise TypeError(
                f"the function given to with_settings must return OAuth2Settings, "
                f"not {type(settings).__name__}"
            )
        problems = self.settings_problems(settings)
        if problems:
            raise ConfigurationError([p.__class__(self._name, p.key, p.message) for p in problems])
        return type(self)(self._name, settings)

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        """Problems of ``settings`` that this provider class cannot work with (beyond the
        record's own validation). The provider name is filled in by the caller."""
        return []

    @abstractmethod
    def authenticate(self) -> Response | OAuth2Info:
        """Run the step of the sign-in the current request is at.

        :return: The redirect to the provider (a response to return as it is) when the flow
            starts; the token when the request is the provider's callback.
        :raises AuthenticationError: when the flow fails.
        """

    @abstractmethod
    def retrieve_profile(self, info: OAuth2Info) -> SocialProfile:
        """Fetch and normalize the signed-in user's profile.

        :raises ProfileRetrievalError: when it cannot be fetched or read.
        """

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name!r}>"


class OAuth2Provider(SocialProvider):
    """The OAuth 2.0 authorization code flow with PKCE, and a profile read from ``apiURL``.

    Used as it is for any block whose name is not a built-in provider: its profile is read with
    the OpenID Connect claim names. Subclasses set the class attributes below and override the
    hooks only for a provider's real quirks.
    """

    __slots__ = ()

    #: The profile address used when the block has no ``apiURL``.
    default_api_url: ClassVar[str | None] = None
    #: How the client authenticates at the token endpoint unless ``customProperties`` says
    #: otherwise (``tokenEndpointAuthMethod``).
    default_token_auth_method: ClassVar[TokenAuthMethod] = "client_secret_post"  # noqa: S105
    #: Where the profile's fields are found in the profile JSON.
    profile_fields: ClassVar[ProfileFields] = OPENID_FIELDS

    # -- configuration ---------------------------------------------------------------------

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        problems = []
        if settings.api_url is None and cls.default_profile_url_for(settings) is None:
            problems.append(
                ConfigurationProblem(
                    None, "apiURL", "is required: this provider has no built-in profile address"
                )
            )
        method = settings.custom_properties.get("tokenEndpointAuthMethod")
        if method is not None and method not in ("client_secret_post", "client_secret_basic"):
            problems.append(
                ConfigurationProblem(
                    None,
                    "customProperties.tokenEndpointAuthMethod",
                    "must be 'client_secret_post' or 'client_secret_basic'",
                )
            )
        return problems

    @classmethod
    def default_profile_url_for(cls, settings: OAuth2Settings) -> str | None:
        """The built-in profile address for ``settings``; tenant-based providers override this
        to derive it from the host of ``accessTokenURL``."""
        return cls.default_api_url

    @property
    def profile_url(self) -> str | None:
        """``apiURL`` if set, else the provider's built-in profile address."""
        return self.settings.api_url or self.default_profile_url_for(self.settings)

    @property
    def token_auth_method(self) -> TokenAuthMethod:
        """How the client authenticates at the token endpoint."""
        method = self.settings.custom_properties.get("tokenEndpointAuthMethod")
        if method == "client_secret_basic":
            return "client_secret_basic"
        if method == "client_secret_post":
            return "client_secret_post"
        return self.default_token_auth_method

    def token_request_headers(self) -> Mapping[str, str]:
        """Extra headers for the token request (e.g. a User-Agent a provider demands)."""
        return {}

    def uses_nonce(self) -> bool:
        """Whether the flow sends an OpenID Connect nonce: when the scope asks for ``openid``."""
        return "openid" in (self.settings.scope or "").split()

    # -- the flow ----------------------------------------------------------------------------

    def authenticate(self) -> Response | OAuth2Info:
        args = request.args
        for name in _CALLBACK_PARAMS:
            values = args.getlist(name)
            if len(values) > 1:
                raise InvalidCallbackError(self.name, f"callback has {name!r} more than once")
            if values and len(values[0]) > MAX_CALLBACK_VALUE:
                raise InvalidCallbackError(self.name, f"callback's {name!r} is too long")
        if "error" in args:
            self._end_with_provider_error(args.get("error", ""))
        if "code" in args or "state" in args:
            return self._finish(args.get("state", ""), args.get("code", ""), args.get("iss"))
        return self._start()

    def _start(self) -> Response:
        settings = self.settings
        if settings.authorization_url is None:
            raise AuthenticationError(
                self.name,
                "has no authorizationURL, so it cannot start a sign-in on the server; it is"
                " configured for a client-side framework, which POSTs the code as JSON",
                status_code=400,
            )
        redirect_uri = resolve_redirect_uri(settings.redirect_url)
        pending = PendingFlow(
            state=flow.new_state(),
            provider=self.name,
            redirect_uri=redirect_uri,
            verifier=flow.new_verifier(),
            next_url=safe_next_path(request.args.get("next")),
            created=state_cookie.now(),
            nonce=flow.new_nonce() if self.uses_nonce() else None,
        )
        url = self.authorization_url(pending)
        flows = state_cookie.load_flows()
        flows.append(pending)
        state_cookie.save_flows(flows)
        response = current_app.response_class(status=302)
        response.headers["Location"] = url
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"
        logger.info("%s: sign-in started", self.name)
        return response

    def authorization_url(self, pending: PendingFlow) -> str:
        """The provider address that starts ``pending``."""
        assert pending.verifier is not None
        return flow.authorization_url(
            self.settings,
            redirect_uri=pending.redirect_uri,
            state=pending.state,
            verifier=pending.verifier,
            nonce=pending.nonce,
        )

    def _end_with_provider_error(self, error: str) -> None:
        state = request.args.get("state")
        if state:
            flows = state_cookie.load_flows()
            pending = state_cookie.find(flows, state)
            if pending is not None and pending.provider == self.name:
                state_cookie.save_flows([item for item in flows if item is not pending])
        code = flow.safe_error_code(error)
        logger.info("%s: the provider answered error %r", self.name, code)
        if error == "access_denied":
            raise AccessDeniedError(self.name, "the user or the provider refused the authorization")
        raise ProviderRefusedError(self.name, code)

    def _finish(self, state: str, code: str, issuer: str | None) -> OAuth2Info:
        if not state:
            raise StateError(self.name, "callback without state")
        flows = state_cookie.load_flows()
        pending = state_cookie.find(flows, state)
        if pending is None:
            raise StateError(
                self.name, "state matches no unexpired sign-in started in this browser"
            )
        state_cookie.save_flows([item for item in flows if item is not pending])
        if pending.provider != self.name:
            raise StateError(
                self.name, f"state was issued for provider {pending.provider!r} (mix-up refused)"
            )
        self.check_issuer(issuer)
        if not code:
            raise InvalidCallbackError(self.name, "callback without code")
        info = self.exchange_code(
            code, redirect_uri=pending.redirect_uri, verifier=pending.verifier
        )
        info = self.verify_token(info, pending)
        setattr(g, _G_FINISHED, pending)
        logger.info("%s: code exchanged for a token", self.name)
        return info

    def authenticate_client_code(self, code: str) -> OAuth2Info:
        """Exchange a code that a client-side framework obtained (no server-side state; the
        framework checked it in the browser). The token request uses the configured
        ``redirectURL``."""
        if not code or len(code) > MAX_CALLBACK_VALUE:
            raise InvalidCallbackError(self.name, "missing or oversized code")
        redirect_uri = resolve_redirect_uri(self.settings.redirect_url)
        info = self.exchange_code(code, redirect_uri=redirect_uri, verifier=None)
        return self.verify_token(info, None)

    def check_issuer(self, issuer: str | None) -> None:
        """RFC 9207: where the provider names itself in the callback (``iss``), it must be the
        expected issuer (``customProperties.issuer``)."""
        expected = self.settings.custom_properties.get("issuer")
        if issuer is not None and expected is not None and issuer != expected:
            raise StateError(
                self.name, "callback's iss is not the expected issuer (mix-up refused)"
            )

    def verify_token(self, info: OAuth2Info, pending: PendingFlow | None) -> OAuth2Info:
        """Check the token response against the flow it ends (OpenID Connect checks the ID token
        here). The base class accepts it as it is."""
        return info

    def exchange_code(self, code: str, *, redirect_uri: str, verifier: str | None) -> OAuth2Info:
        """The token request (RFC 6749 4.1.3), with the identical ``redirect_uri``.

        :raises UnexpectedResponseError: when the provider fails or answers no valid token.
        """
        settings = self.settings
        basic = self.token_auth_method == "client_secret_basic"  # noqa: S105 - a method name
        body = flow.token_request_body(
            settings,
            code=code,
            redirect_uri=redirect_uri,
            verifier=verifier,
            credentials_in_body=not basic,
        )
        response = self.send(
            "POST",
            settings.access_token_url,
            step="token request",
            error=UnexpectedResponseError,
            headers=flow.token_headers(
                settings, basic_auth=basic, extra=self.token_request_headers()
            ),
            data=body,
        )
        return self.parse_token_response(response)

    def parse_token_response(self, response: ProviderResponse) -> OAuth2Info:
        """Read the token endpoint's answer."""
        return flow.parse_token_response(self.name, response)

    def send(
        self,
        method: str,
        url: str,
        *,
        step: str,
        error: type[AuthenticationError],
        headers: Mapping[str, str] | None = None,
        data: str | Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> ProviderResponse:
        """Send a request to the provider with the app's timeout and size cap."""
        app_state = get_app_state()
        return get_client().request(
            method,
            url,
            provider=self.name,
            step=step,
            error=error,
            timeout=app_state.timeout,
            max_bytes=app_state.max_response_bytes,
            headers=headers,
            data=data,
            params=params,
        )

    # -- the profile -------------------------------------------------------------------------

    def retrieve_profile(self, info: OAuth2Info) -> SocialProfile:
        raw = self.fetch_profile(info)
        profile = self.parse_profile(raw, info)
        logger.info("%s: profile retrieved", self.name)
        return profile

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        """The profile JSON: by default a GET of :attr:`profile_url` with the bearer token."""
        url = self.profile_url
        if url is None:
            raise ProfileRetrievalError(self.name, "no profile address (apiURL) is configured")
        raw: Mapping[str, Any] = self.request_json("GET", url, info)
        return raw

    def request_json(
        self,
        method: str,
        url: str,
        info: OAuth2Info | None,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        data: str | Mapping[str, str] | None = None,
        step: str = "profile request",
    ) -> Any:
        """A JSON request to the provider's API, the access token in the ``Authorization``
        header when ``info`` is given.

        :raises ProfileRetrievalError: for a failed request, a non-2xx status or a body that
            is not JSON.
        """
        all_headers = {"Accept": "application/json"}
        if info is not None:
            all_headers["Authorization"] = f"Bearer {info.access_token}"
        if headers:
            all_headers.update(headers)
        response = self.send(
            method,
            url,
            step=step,
            error=ProfileRetrievalError,
            headers=all_headers,
            params=params,
            data=data,
        )
        if not 200 <= response.status < 300:
            raise ProfileRetrievalError(self.name, f"{step} failed: HTTP {response.status}")
        try:
            return json.loads(response.body)
        except (UnicodeDecodeError, ValueError):
            raise ProfileRetrievalError(
                self.name, f"{step}: HTTP {response.status} answered no JSON"
            ) from None

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        """Map the profile JSON onto :class:`SocialProfile` with :attr:`profile_fields`.

        :raises ProfileRetrievalError: when the JSON is not an object or has no user id.
        """
        if not isinstance(raw, Mapping):
            raise ProfileRetrievalError(self.name, "profile answer is not a JSON object")
        profile = self.profile_fields.extract(self.name, raw)
        if profile is None:
            raise ProfileRetrievalError(self.name, "profile answer has no user id")
        return profile


def finished_flow() -> PendingFlow | None:
    """The flow the current request finished, if any."""
    found = g.get(_G_FINISHED)
    return found if isinstance(found, PendingFlow) else None
