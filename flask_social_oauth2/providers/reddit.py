"""Reddit: the signed-in account (``/api/v1/me``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..errors import ConfigurationProblem
from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider, TokenAuthMethod
from ..settings import OAuth2Info, OAuth2Settings
from ._common import package_version, require_profile_url


class RedditProvider(OAuth2Provider):
    """Sign in with Reddit.

    Reddit throttles or refuses generic User-Agents, so the token request and every API call
    send a descriptive one: ``customProperties.userAgent`` (Reddit asks for
    ``<platform>:<app ID>:<version> (by /u/<reddit username>)``), else
    ``web:<clientID>:<this package's version> (flask-social-oauth2)``. The token endpoint wants
    HTTP Basic client authentication. The profile call asks for ``raw_json=1`` so that URLs
    come without HTML escaping (``&amp;``). Reddit accounts have no real name or e-mail
    address: ``full_name`` is the user name.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://oauth.reddit.com/api/v1/me"
    default_token_auth_method: ClassVar[TokenAuthMethod] = "client_secret_basic"  # noqa: S105
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="id", full_name="name", avatar_url=("icon_img", "snoovatar_img")
    )

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        problems = super().settings_problems(settings)
        agent = settings.custom_properties.get("userAgent")
        if agent is not None and (
            not agent.strip() or any(ord(char) < 0x20 or ord(char) == 0x7F for char in agent)
        ):
            problems.append(
                ConfigurationProblem(
                    None,
                    "customProperties.userAgent",
                    "must be a non-empty line without control characters",
                )
            )
        return problems

    @property
    def user_agent(self) -> str:
        """The User-Agent sent to Reddit."""
        configured = self.settings.custom_properties.get("userAgent")
        if configured:
            return configured
        return f"web:{self.settings.client_id}:{package_version()} (flask-social-oauth2)"

    def token_request_headers(self) -> Mapping[str, str]:
        return {"User-Agent": self.user_agent}

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        raw: Mapping[str, Any] = self.request_json(
            "GET",
            require_profile_url(self),
            info,
            headers={"User-Agent": self.user_agent},
            params={"raw_json": "1"},
        )
        return raw
