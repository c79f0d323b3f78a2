"""Bitbucket Cloud: the current user and their e-mail addresses."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ..profile_fields import ProfileFields, lookup
from ..provider import TokenAuthMethod
from ..settings import OAuth2Info, SocialProfile
from ._common import (
    EmailListProvider,
    optional_json,
    primary_email,
)


class BitbucketProvider(EmailListProvider):
    """Sign in with Bitbucket Cloud.

    The profile is ``GET https://api.bitbucket.org/2.0/user``; the user's key is the account
    ``uuid``. That answer carries no e-mail address, so it is read from
    ``GET https://api.bitbucket.org/2.0/user/emails`` (scope ``email``; the profile address
    plus ``/emails``, or ``customProperties.emailsURL``), taking the primary confirmed entry.
    The token endpoint is called with HTTP Basic client authentication, as Bitbucket's
    documentation shows.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.bitbucket.org/2.0/user"
    default_token_auth_method: ClassVar[TokenAuthMethod] = "client_secret_basic"  # noqa: S105
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key=("uuid", "account_id"),
        full_name=("display_name", "nickname"),
        avatar_url="links.avatar.href",
    )

    def retrieve_profile(self, info: OAuth2Info) -> SocialProfile:
        profile = super().retrieve_profile(info)
        answer = optional_json(self, self.emails_url, info, "e-mail request")
        email = primary_email(
            lookup(answer, "values"), address="email", primary="is_primary", verified="is_confirmed"
        )
        return dataclasses.replace(profile, email=email)
