"""The one implementation every built-in provider shares, driven by its :class:`ProviderFacts`."""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from flask import has_request_context, request

from ..config.profile_fields import first_text, lookup
from ..config.provider_options import PropertyReader
from ..config.settings import OAuth2Info, OAuth2Settings, SocialProfile
from ..errors import (
    AuthenticationError,
    ConfigurationProblem,
    InvalidCallbackError,
    ProfileRetrievalError,
)
from ..oauth.dpop import DPoPKey
from ..oauth.flow import safe_error_code
from ..oauth.provider_response import ProviderResponse
from ..urls import check_endpoint_url
from ..web.state_cookie import PendingFlow
from .facts import CallbackTokenServer, FactsOptions, ProviderFacts, Quirk
from .hooks import ProviderHooks
from .oauth2 import OAuth2Provider

logger = logging.getLogger("flask_social_oauth2")

_JSON: Final[Mapping[str, str]] = {"Content-Type": "application/json"}


@functools.cache
def package_version() -> str:
    """This package's version, for User-Agent strings."""
    try:
        return importlib.metadata.version("flask-social-oauth2")
    except importlib.metadata.PackageNotFoundError:
        return "dev"


def token_url_base(settings: OAuth2Settings) -> str:
    """``accessTokenURL`` without query, fragment and trailing slash."""
    parts = urlsplit(settings.access_token_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower case, for comparing servers."""
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def primary_email(entries: Any, *, address: str, primary: str, verified: str) -> str | None:
    """The address of the entry marked primary *and* verified in a provider's list of
    e-mail addresses, else ``None`` (an unverified address is never taken)."""
    if not isinstance(entries, Iterable) or isinstance(entries, str | bytes | Mapping):
        return None
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        value = entry.get(address)
        if entry.get(primary) is True and entry.get(verified) is True and isinstance(value, str):
            return value.strip() or None
    return None


class BuiltinProvider(OAuth2Provider):
    """A built-in provider: the shared implementation, read from the class's :attr:`facts`.

    A subclass sets ``facts`` (a :class:`ProviderFacts`); the class attributes the flow reads
    (profile address, client authentication, issuer, profile mapping) follow from it. Providers
    without code of their own get a generated subclass (:func:`provider_class`).
    """

    __slots__ = ("_facts_options",)

    facts: ClassVar[ProviderFacts]

    def __init__(self, name: str, settings: OAuth2Settings) -> None:
        super().__init__(name, settings)
        # the keys the facts name, parsed once per provider object like the generic ones (a
        # class without facts, BuiltinProvider itself, names none)
        facts: ProviderFacts | None = getattr(type(self), "facts", None)
        read = PropertyReader(self.settings)
        self._facts_options = FactsOptions() if facts is None else facts.read_options(read)

    @property
    def facts_options(self) -> FactsOptions:
        """The ``customProperties`` the provider's facts name, parsed when it was made."""
        return self._facts_options

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        facts = cls.__dict__.get("facts")
        if isinstance(facts, ProviderFacts):
            cls.default_api_url = facts.profile_url
            cls.default_token_auth_method = facts.client_auth
            cls.profile_fields = facts.profile
            cls.openid_connect = facts.openid_connect
            cls.default_issuer = facts.issuer
            cls.issuer_from_token_url = facts.issuer_from_token_url
            cls.extra_id_token_issuers = facts.extra_id_token_issuers
            cls.default_api_base = facts.api_base
            cls.default_revocation_url = facts.revocation_url

    @property
    def title(self) -> str:
        return self.facts.title or super().title

    # -- configuration ---------------------------------------------------------------------

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        facts = cls.facts
        problems = []
        profile_elsewhere = facts.profile_url_from_token_answer or facts.profile_in_token_answer
        for problem in super().settings_problems(settings):
            if problem.key == "apiURL" and profile_elsewhere:
                continue  # the token answer holds the profile, or names its address
            if problem.key == "apiURL" and facts.api_url_hint is not None:
                problem = ConfigurationProblem(None, "apiURL", f"is required: {facts.api_url_hint}")
            problems.append(problem)
        read = PropertyReader(settings)
        facts.read_options(read)
        return problems + read.problems

    @classmethod
    def default_profile_url_for(cls, settings: OAuth2Settings) -> str | None:
        facts = cls.facts
        if not facts.profile_url_from_token_url:
            return facts.profile_url
        base = token_url_base(settings)
        for pattern, template in facts.profile_url_from_token_url:
            match = re.fullmatch(pattern, base)
            if match is not None:
                return match.expand(template)
        return None

    # -- requests ----------------------------------------------------------------------------

    @property
    def user_agent(self) -> str:
        """The User-Agent of a :attr:`Quirk.DESCRIPTIVE_USER_AGENT` provider."""
        configured = self._facts_options.user_agent
        if configured:
            return configured
        return f"web:{self.settings.client_id}:{package_version()} (flask-social-oauth2)"

    def token_request_headers(self) -> Mapping[str, str]:
        headers = {}
        if Quirk.DESCRIPTIVE_USER_AGENT in self.facts.quirks:
            headers["User-Agent"] = self.user_agent
        if Quirk.JSON_TOKEN_REQUEST in self.facts.quirks:
            headers["Content-Type"] = "application/json"
        return headers

    def api_headers(self) -> dict[str, str]:
        """The headers of every API call to the provider (besides the token)."""
        quirks = self.facts.quirks
        headers = dict(self.facts.api_headers)
        if Quirk.CLIENT_ID_HEADER in quirks:
            headers["Client-Id"] = self.settings.client_id
        if Quirk.DESCRIPTIVE_USER_AGENT in quirks:
            headers["User-Agent"] = self.user_agent
        return headers

    def authorization(self, info: OAuth2Info) -> dict[str, str]:
        """The ``Authorization`` header of an API call when the provider wants another scheme
        than ``Bearer`` (which :meth:`request_json` sets itself)."""
        scheme = self.facts.api_token_scheme
        return {} if scheme == "Bearer" else {"Authorization": f"{scheme} {info.access_token}"}

    def profile_query(self, info: OAuth2Info) -> dict[str, str]:
        """The query parameters of the profile request."""
        params = {
            param.name: param.value(self._facts_options) for param in self.facts.profile_params
        }
        return self.hooks.profile_query(self, info, params)

    def authorization_url(self, pending: PendingFlow, dpop_key: DPoPKey | None = None) -> str:
        url = super().authorization_url(pending, dpop_key)
        configured = self.settings.authorization_params
        added = [(k, v) for k, v in self.facts.authorization_params.items() if k not in configured]
        if Quirk.CLIENT_KEY in self.facts.quirks:
            added.append(("client_key", self.settings.client_id))
        if not added:
            return url
        from oauthlib.common import add_params_to_uri  # at first use, not with the app

        return str(add_params_to_uri(url, added))

    def callback_token_server(self) -> str | None:
        """The server the callback names for the token request (:attr:`ProviderFacts.
        callback_token_server`), checked against the allowed ones; ``None`` when the callback
        names none (then ``accessTokenURL`` is used).

        :raises InvalidCallbackError: for a server that is not allowed (400).
        """
        where = self.facts.callback_token_server
        if where is None or not has_request_context():
            return None
        named = request.args.get(where.parameter) or request.form.get(where.parameter)
        if not named:
            return None
        server = origin_of(named)
        if server not in self.allowed_token_servers(where) or check_endpoint_url(server):
            raise InvalidCallbackError(
                self.name, f"callback's {where.parameter!r} is not an allowed server"
            )
        return server

    def allowed_token_servers(self, where: CallbackTokenServer) -> frozenset[str]:
        """The servers a callback may name: the provider's own, the origin of
        ``accessTokenURL`` and ``customProperties.accountsServers``."""
        listed = self._facts_options.accounts_servers
        own = (self.settings.access_token_url, *where.servers, *listed)
        return frozenset(origin_of(url) for url in own)

    def received_token(self, info: OAuth2Info) -> OAuth2Info:
        info = super().received_token(info)
        where = self.facts.callback_token_server
        server = self.callback_token_server()
        if where is not None and server is not None:
            info = dataclasses.replace(info, params={**info.params, where.parameter: server})
        return info

    def refresh(self, info: OAuth2Info, *, scope: str | None = None) -> OAuth2Info:
        where = self.facts.callback_token_server
        named = info.params.get(where.parameter) if where is not None else None
        if where is None or not isinstance(named, str):
            return super().refresh(info, scope=scope)
        server = origin_of(named)
        if server not in self.allowed_token_servers(where) or check_endpoint_url(server):
            raise AuthenticationError(
                self.name, f"cannot refresh: the token's {where.parameter!r} is not allowed"
            )
        token_url = server + where.token_path
        same_server = self.with_settings(lambda s: s.replace(access_token_url=token_url))
        renewed = OAuth2Provider.refresh(same_server, info, scope=scope)
        return dataclasses.replace(renewed, params={**renewed.params, where.parameter: server})

    def code_exchange_url(self) -> str:
        server = self.callback_token_server()
        if server is None:
            return super().code_exchange_url()
        assert self.facts.callback_token_server is not None
        return server + self.facts.callback_token_server.token_path

    def token_body_form(self) -> Callable[[str], str] | None:
        quirks = self.facts.quirks & {Quirk.CLIENT_KEY, Quirk.JSON_TOKEN_REQUEST}
        if not quirks:
            return None
        return functools.partial(_token_body_form, frozenset(quirks), self.settings.client_id)

    def parse_token_response(self, response: ProviderResponse) -> OAuth2Info:
        if Quirk.TOKEN_ANSWER_IN_DATA_LIST in self.facts.quirks:
            response = unwrapped_token_answer(response)
        return super().parse_token_response(response)

    def profile_form(self, info: OAuth2Info) -> dict[str, str]:
        """The form body of a profile ``POST`` that carries the token."""
        form = {"access_token": info.access_token}
        form.update(
            (param.name, param.value(self._facts_options)) for param in self.facts.profile_form
        )
        return self.hooks.profile_form(self, info, form)

    # -- the profile -------------------------------------------------------------------------

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        facts = self.facts
        if facts.profile_in_token_answer is not None:
            given = lookup(info.params, facts.profile_in_token_answer)
            if isinstance(given, Mapping):
                return given
        url = self.profile_url_for(info)
        if url is None:  # an OpenID Connect provider: discovery's userinfo, or the ID token
            return super().fetch_profile(info)
        headers = self.api_headers()
        data: str | Mapping[str, str] | None = facts.profile_json_body
        bearer: OAuth2Info | None = info
        params = self.profile_query(info)
        if Quirk.TOKEN_IN_FORM_BODY in facts.quirks:
            data, bearer = self.profile_form(info), None
        else:
            if data is not None:
                headers.update(_JSON)
            if facts.token_query_parameter is not None:
                params[facts.token_query_parameter] = info.access_token
                bearer = None
            elif Quirk.TOKEN_IN_PROFILE_PATH in facts.quirks:
                url = f"{url.rstrip('/')}/{quote(info.access_token, safe='')}"
            if bearer is not None:
                headers.update(self.authorization(info))
        raw: Mapping[str, Any] = self.request_json(
            facts.profile_method, url, bearer, headers=headers, params=params or None, data=data
        )
        return raw

    def profile_url_for(self, info: OAuth2Info) -> str | None:
        """The profile address for this token: ``apiURL``; else the one the token answer
        names (:attr:`ProviderFacts.profile_url_from_token_answer`) or the callback's server
        implies; else the built-in one.

        :raises ProfileRetrievalError: when the token answer names no usable address.
        """
        facts = self.facts
        if self.settings.api_url is not None:
            return self.settings.api_url
        if facts.profile_url_from_token_answer is not None:
            named = info.params.get(facts.profile_url_from_token_answer)
            if not isinstance(named, str) or check_endpoint_url(named) is not None:
                raise ProfileRetrievalError(
                    self.name,
                    f"token answer's {facts.profile_url_from_token_answer!r} is not an https"
                    " address",
                )
            return named
        where = facts.callback_token_server
        if where is not None and isinstance(info.params.get(where.parameter), str):
            return str(info.params[where.parameter]) + where.profile_path
        return self.profile_url

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        quirks = self.facts.quirks
        if isinstance(raw, Mapping):
            if Quirk.OK_FALSE_IS_ERROR in quirks and raw.get("ok") is False:
                error = raw.get("error")
                code = safe_error_code(error) if isinstance(error, str) else "<missing>"
                raise ProfileRetrievalError(self.name, f"profile request failed: error {code!r}")
            if Quirk.ERROR_CODE_NOT_OK_IS_ERROR in quirks:
                status = first_text(raw, "error.code")
                if status != "ok":
                    shown = safe_error_code(status) if status is not None else "<missing>"
                    raise ProfileRetrievalError(
                        self.name, f"profile request failed: {self.facts.title} error {shown!r}"
                    )
            if Quirk.ERROR_OBJECT_IS_ERROR in quirks and isinstance(raw.get("error"), Mapping):
                code = first_text(raw, "error.error_code") or "<missing>"
                raise ProfileRetrievalError(
                    self.name, f"profile request failed: {self.facts.title} error {code}"
                )
        if not isinstance(raw, Mapping):
            raise ProfileRetrievalError(self.name, "profile answer is not a JSON object")
        profile = self.profile_fields.extract(self.name, raw, info.params)
        if profile is None:
            raise ProfileRetrievalError(self.name, "profile answer has no user id")
        return profile

    def complete_profile(self, info: OAuth2Info, profile: SocialProfile) -> SocialProfile:
        if self.facts.email_list is not None and profile.email is None:
            email = self.listed_email(info)
            verified = True if email is not None else None
            profile = dataclasses.replace(profile, email=email, email_verified=verified)
        return profile

    @property
    def emails_url(self) -> str:
        """Where the user's e-mail addresses are listed (:attr:`ProviderFacts.email_list`)."""
        configured = self._facts_options.emails_url
        if configured:
            return configured
        url = self.profile_url
        if url is None:
            raise ProfileRetrievalError(self.name, "no profile address (apiURL) is configured")
        parts = urlsplit(url)
        return urlunsplit((parts.scheme, parts.netloc, f"{parts.path.rstrip('/')}/emails", "", ""))

    def listed_email(self, info: OAuth2Info) -> str | None:
        """The primary verified address of the provider's e-mail list, or ``None`` (also when
        the list cannot be read: the sign-in goes on without an address)."""
        listing = self.facts.email_list
        assert listing is not None
        headers = self.api_headers() | self.authorization(info)
        answer = self.optional_json(self.emails_url, info, "e-mail request", headers)
        entries = lookup(answer, listing.entries) if listing.entries else answer
        return primary_email(
            entries, address=listing.address, primary=listing.primary, verified=listing.verified
        )


def _token_body_form(quirks: frozenset[Quirk], client_id: str, body: str) -> str:
    """A token endpoint request's form ``body`` as a provider with ``quirks`` wants it."""
    if Quirk.CLIENT_KEY in quirks:
        body = urlencode([*parse_qsl(body), ("client_key", client_id)])
    if Quirk.JSON_TOKEN_REQUEST in quirks:
        body = json.dumps(dict(parse_qsl(body)))
    return body


def unwrapped_token_answer(response: ProviderResponse) -> ProviderResponse:
    """A token answer of the form ``{"data": [{"access_token": ...}]}`` as its one entry;
    any other answer as it is."""
    try:
        answer = response.json()
    except ValueError:
        return response
    if isinstance(answer, Mapping) and "access_token" not in answer:
        entries = answer.get("data")
        if isinstance(entries, list) and len(entries) == 1 and isinstance(entries[0], Mapping):
            body = json.dumps(entries[0]).encode("utf-8")
            return dataclasses.replace(response, body=body)
    return response


def provider_class(
    facts: ProviderFacts,
    hooks: ProviderHooks | None = None,
    *,
    module: str | None = None,
    doc: str | None = None,
) -> type[BuiltinProvider]:
    """The class of a built-in provider: :class:`BuiltinProvider` bound to ``facts`` and,
    where the provider truly differs, ``hooks``; named ``facts.class_name`` in ``module``
    (default :mod:`flask_social_oauth2.providers`). The class holds data only, no code."""
    namespace: dict[str, Any] = {
        "__slots__": (),
        "__module__": module or __package__,
        "__qualname__": facts.class_name,
        "__doc__": doc or f"Sign in with {facts.title} (see ``PROVIDER_FACTS[{facts.name!r}]``).",
        "facts": facts,
    }
    if hooks is not None:
        namespace["hooks"] = hooks
    return type(facts.class_name, (BuiltinProvider,), namespace)
