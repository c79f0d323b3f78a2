"""GitHub (and GitHub Enterprise Server): the authenticated user."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final

from ..profile_fields import ProfileFields
from ..settings import OAuth2Info, SocialProfile
from ._common import (
    EmailListProvider,
    optional_json,
    primary_email,
    require_profile_url,
)

#: Headers GitHub's REST API documentation asks for.
API_HEADERS: Final[Mapping[str, str]] = MappingProxyType(
    {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
)


class GitHubProvider(EmailListProvider):
    """Sign in with GitHub.

    The profile is ``GET https://api.github.com/user``. A user who keeps the e-mail address
    private has ``"email": null`` there; the address is then read from
    ``GET https://api.github.com/user/emails`` (scope ``user:email``), taking the entry that is
    both primary and verified. That second address is the profile address plus ``/emails``
    (``customProperties.emailsURL`` overrides it), so GitHub Enterprise Server works with
    ``apiURL: https://<host>/api/v3/user``. When the e-mail list cannot be read the profile
    comes without an address instead of failing.

    GitHub answers a failed code exchange with HTTP 200 and an ``error`` field; the core's
    token parsing already refuses such an answer.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.github.com/user"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="id", full_name="name", email="email", avatar_url="avatar_url"
    )

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        raw: Mapping[str, Any] = self.request_json(
            "GET", require_profile_url(self), info, headers=API_HEADERS
        )
        return raw

    def retrieve_profile(self, info: OAuth2Info) -> SocialProfile:
        profile = super().retrieve_profile(info)
        if profile.email is None:
            profile = dataclasses.replace(profile, email=self.private_email(info))
        return profile

    def private_email(self, info: OAuth2Info) -> str | None:
        """The primary verified address from the e-mail list, or ``None``."""
        entries = optional_json(self, self.emails_url, info, "e-mail request", API_HEADERS)
        return primary_email(entries, address="email", primary="primary", verified="verified")
