"""The one implementation every built-in provider shares, driven by its :class:`ProviderFacts`."""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigurationProblem, ProfileRetrievalError
from ..flow import safe_error_code
from ..profile_fields import first_text, lookup
from ..provider import OAuth2Provider
from ..settings import OAuth2Info, OAuth2Settings, SocialProfile
from .facts import ProviderFacts, Quirk

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

    __slots__ = ()

    facts: ClassVar[ProviderFacts]

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

    # -- configuration ---------------------------------------------------------------------

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        facts = cls.facts
        problems = []
        for problem in super().settings_problems(settings):
            if problem.key == "apiURL" and facts.api_url_hint is not None:
                problem = ConfigurationProblem(None, "apiURL", f"is required: {facts.api_url_hint}")
            problems.append(problem)
        for rule in facts.rules:
            value = settings.custom_properties.get(rule.key)
            message = None if value is None else rule.problem(value)
            if message is not None:
                problems.append(ConfigurationProblem(None, f"customProperties.{rule.key}", message))
        return problems

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
        configured = self.settings.custom_properties.get("userAgent")
        if configured:
            return configured
        return f"web:{self.settings.client_id}:{package_version()} (flask-social-oauth2)"

    def token_request_headers(self) -> Mapping[str, str]:
        if Quirk.DESCRIPTIVE_USER_AGENT in self.facts.quirks:
            return {"User-Agent": self.user_agent}
        return {}

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
        return {param.name: param.value(self.settings) for param in self.facts.profile_params}

    def profile_form(self, info: OAuth2Info) -> dict[str, str]:
        """The form body of a profile ``POST`` that carries the token."""
        form = {"access_token": info.access_token}
        form.update((param.name, param.value(self.settings)) for param in self.facts.profile_form)
        return form

    # -- the profile -------------------------------------------------------------------------

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        facts = self.facts
        if facts.profile_in_token_answer is not None:
            given = lookup(info.params, facts.profile_in_token_answer)
            if isinstance(given, Mapping):
                return given
        url = self.profile_url
        if url is None:  # an OpenID Connect provider: discovery's userinfo, or the ID token
            return super().fetch_profile(info)
        headers = self.api_headers()
        data: str | Mapping[str, str] | None = facts.profile_json_body
        bearer: OAuth2Info | None = info
        if Quirk.TOKEN_IN_FORM_BODY in facts.quirks:
            data, bearer = self.profile_form(info), None
        else:
            headers.update(self.authorization(info))
            if data is not None:
                headers.update(_JSON)
        raw: Mapping[str, Any] = self.request_json(
            facts.profile_method,
            url,
            bearer,
            headers=headers,
            params=self.profile_query(info) or None,
            data=data,
        )
        return raw

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        quirks = self.facts.quirks
        if isinstance(raw, Mapping):
            if Quirk.OK_FALSE_IS_ERROR in quirks and raw.get("ok") is False:
                error = raw.get("error")
                code = safe_error_code(error) if isinstance(error, str) else "<missing>"
                raise ProfileRetrievalError(self.name, f"profile request failed: error {code!r}")
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

    def retrieve_profile(self, info: OAuth2Info) -> SocialProfile:
        profile = super().retrieve_profile(info)
        if self.facts.email_list is not None and profile.email is None:
            email = self.listed_email(info)
            verified = True if email is not None else None
            profile = dataclasses.replace(profile, email=email, email_verified=verified)
        return profile

    @property
    def emails_url(self) -> str:
        """Where the user's e-mail addresses are listed (:attr:`ProviderFacts.email_list`)."""
        configured = self.settings.custom_properties.get("emailsURL")
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

    def optional_json(
        self, url: str, info: OAuth2Info, step: str, headers: Mapping[str, str] | None = None
    ) -> Any:
        """A ``GET`` for an optional part of the profile: the JSON, or ``None`` when the
        request fails, so that the sign-in goes on without that field."""
        try:
            return self.request_json("GET", url, info, headers=headers, step=step)
        except ProfileRetrievalError as error:
            logger.info("%s: %s skipped: %s", self.name, step, error)
            return None


def provider_class(facts: ProviderFacts) -> type[BuiltinProvider]:
    """The class of a provider that needs no code of its own: :class:`BuiltinProvider` bound
    to ``facts``, named ``facts.class_name`` in :mod:`flask_social_oauth2.providers`."""
    namespace = {
        "__slots__": (),
        "__module__": __package__,
        "__qualname__": facts.class_name,
        "__doc__": f"Sign in with {facts.title} (see ``PROVIDER_FACTS[{facts.name!r}]``).",
        "facts": facts,
    }
    return type(facts.class_name, (BuiltinProvider,), namespace)
