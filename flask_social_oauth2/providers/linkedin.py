"""LinkedIn: Sign In with LinkedIn using OpenID Connect (userinfo)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from ..errors import ConfigurationProblem
from ..profile_fields import ProfileFields, first_text, lookup
from ..provider import OAuth2Provider
from ..settings import OAuth2Info, OAuth2Settings, SocialProfile
from ._common import optional_json, url_property_problems


class LinkedInProvider(OAuth2Provider):
    """Sign in with LinkedIn.

    The profile is the OpenID Connect userinfo ``GET https://api.linkedin.com/v2/userinfo``
    (scopes ``openid profile email``). For apps still on the legacy member API
    (``apiURL: https://api.linkedin.com/v2/me``, which has ``id``, ``localizedFirstName`` and
    ``localizedLastName`` but no e-mail or picture), two ``customProperties`` name the extra
    calls, made only when the field is missing:

    * ``emailURL``: e.g. ``https://api.linkedin.com/v2/emailAddress?q=members&projection=
      (elements*(handle~))``; the address is ``elements[0]["handle~"].emailAddress``.
    * ``photoURL``: e.g. ``https://api.linkedin.com/v2/me?projection=(id,profilePicture
      (displayImage~:playableStreams))``; the largest (last) image is taken.

    When such a call fails, the profile comes without that field.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.linkedin.com/v2/userinfo"
    openid_connect: ClassVar[bool] = True
    default_issuer: ClassVar[str | None] = "https://www.linkedin.com/oauth"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key=("sub", "id"),
        first_name=("given_name", "localizedFirstName"),
        last_name=("family_name", "localizedLastName"),
        full_name="name",
        email="email",
        avatar_url="picture",
    )

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        return super().settings_problems(settings) + url_property_problems(
            settings, ("emailURL", "photoURL")
        )

    def retrieve_profile(self, info: OAuth2Info) -> SocialProfile:
        profile = super().retrieve_profile(info)
        properties = self.settings.custom_properties
        email_url = properties.get("emailURL")
        if profile.email is None and email_url:
            answer = optional_json(self, email_url, info, "e-mail request")
            email = first_text(answer, "elements.0.handle~.emailAddress")
            profile = dataclasses.replace(profile, email=email)
        photo_url = properties.get("photoURL")
        if profile.avatar_url is None and photo_url:
            answer = optional_json(self, photo_url, info, "photo request")
            profile = dataclasses.replace(profile, avatar_url=_largest_image(answer))
        return profile


def _largest_image(answer: Any) -> str | None:
    images = lookup(answer, "profilePicture.displayImage~.elements")
    if not isinstance(images, list):
        return None
    for image in reversed(images):
        if isinstance(image, Mapping):
            url = first_text(image, "identifiers.0.identifier")
            if url is not None:
                return url
    return None
