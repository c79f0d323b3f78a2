"""Small helpers shared by the built-in provider modules (not public API)."""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import logging
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigurationProblem, ProfileRetrievalError
from ..provider import OAuth2Provider
from ..settings import OAuth2Info, OAuth2Settings, SocialProfile
from ..urls import check_endpoint_url

logger = logging.getLogger("flask_social_oauth2")


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def token_url_path(settings: OAuth2Settings) -> str:
    """The path of ``accessTokenURL``, without a trailing slash."""
    return urlsplit(settings.access_token_url).path.rstrip("/")


def sub_resource(url: str, name: str) -> str:
    """``url`` with ``/name`` appended to its path; query and fragment dropped."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"{parts.path.rstrip('/')}/{name}", "", ""))


def absolute_url(value: str | None) -> str | None:
    """``value`` when it is an absolute http(s) URL, else ``None`` (e.g. a relative
    placeholder path some providers send instead of a picture)."""
    if value is None:
        return None
    scheme = urlsplit(value).scheme.lower()
    return value if scheme in ("http", "https") else None


def compose_full_name(profile: SocialProfile) -> SocialProfile:
    """The profile with ``full_name`` made of the first and last names when the provider
    sends no full name."""
    if profile.full_name is not None:
        return profile
    parts = [part for part in (profile.first_name, profile.last_name) if part]
    return dataclasses.replace(profile, full_name=" ".join(parts)) if parts else profile


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


def url_property_problems(
    settings: OAuth2Settings, keys: Iterable[str]
) -> list[ConfigurationProblem]:
    """Check ``customProperties`` entries that hold an API address: the access token is sent
    there, so they follow the rule of ``apiURL`` (https, plain http only on loopback)."""
    problems = []
    for key in keys:
        value = settings.custom_properties.get(key)
        if value is None:
            continue
        error = check_endpoint_url(value)
        if error:
            problems.append(ConfigurationProblem(None, f"customProperties.{key}", error))
    return problems


def choice_problem(
    settings: OAuth2Settings, key: str, allowed: Iterable[str]
) -> list[ConfigurationProblem]:
    """A problem when ``customProperties[key]`` is set to a value outside ``allowed``."""
    value = settings.custom_properties.get(key)
    options = tuple(allowed)
    if value is None or value in options:
        return []
    shown = " or ".join(repr(option) for option in options)
    return [ConfigurationProblem(None, f"customProperties.{key}", f"must be {shown}")]


@functools.cache
def package_version() -> str:
    """This package's version, for User-Agent strings."""
    try:
        return importlib.metadata.version("flask-social-oauth2")
    except importlib.metadata.PackageNotFoundError:
        return "dev"


def require_profile_url(provider: OAuth2Provider) -> str:
    """The provider's profile address, or :class:`ProfileRetrievalError` when it has none."""
    url = provider.profile_url
    if url is None:
        raise ProfileRetrievalError(provider.name, "no profile address (apiURL) is configured")
    return url


def optional_json(
    provider: OAuth2Provider,
    url: str,
    info: OAuth2Info,
    step: str,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """A ``GET`` for an optional part of the profile (e.g. a private e-mail address): the JSON,
    or ``None`` when the request fails, so that the sign-in goes on without that field."""
    try:
        return provider.request_json("GET", url, info, headers=headers, step=step)
    except ProfileRetrievalError as error:
        logger.info("%s: %s skipped: %s", provider.name, step, error)
        return None


class EmailListProvider(OAuth2Provider):
    """A provider whose e-mail addresses are listed at the profile address plus ``/emails``
    (GitHub, Bitbucket); ``customProperties.emailsURL`` (https) overrides that address."""

    __slots__ = ()

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        return super().settings_problems(settings) + url_property_problems(settings, ("emailsURL",))

    @property
    def emails_url(self) -> str:
        """Where the user's e-mail addresses are listed."""
        configured = self.settings.custom_properties.get("emailsURL")
        return configured or sub_resource(require_profile_url(self), "emails")
