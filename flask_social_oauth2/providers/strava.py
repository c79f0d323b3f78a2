"""Strava: the athlete, sent with the token."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Info, SocialProfile
from ._common import absolute_url, compose_full_name, require_profile_url


class StravaProvider(OAuth2Provider):
    """Sign in with Strava.

    Strava's token response carries the athlete (a summary representation) beside the token;
    the profile is read from ``info.params["athlete"]`` with no further request. Only when it
    is absent is ``GET https://www.strava.com/api/v3/athlete`` called. Strava gives no e-mail
    address; ``full_name`` is first and last name joined. A user without a photo has a relative
    placeholder path (``avatar/athlete/large.png``) as ``profile``, which gives ``None``.
    Strava's scopes are separated by commas (e.g. ``scope: read,activity:read``).
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://www.strava.com/api/v3/athlete"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="id",
        first_name="firstname",
        last_name="lastname",
        avatar_url=("profile", "profile_medium"),
    )

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        athlete = info.params.get("athlete")
        if isinstance(athlete, Mapping):
            return athlete
        raw: Mapping[str, Any] = self.request_json("GET", require_profile_url(self), info)
        return raw

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        profile = super().parse_profile(raw, info)
        profile = dataclasses.replace(profile, avatar_url=absolute_url(profile.avatar_url))
        return compose_full_name(profile)
