"""LinkedIn: Sign In with LinkedIn using OpenID Connect, and the legacy member API."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ..config.profile_fields import ProfileFields, as_text, first_text, lookup
from ..config.provider_options import PropertyReader
from ..config.settings import OAuth2Info, SocialProfile
from .base import BuiltinProvider, provider_class
from .facts import PropertyRule, ProviderFacts
from .hooks import HookedProvider, ProviderHooks

FACTS: Final = ProviderFacts(
    name="linkedin",
    title="LinkedIn",
    class_name="LinkedInProvider",
    code=True,
    code_quirks=("legacy API: localized names, e-mail/photo calls",),
    authorization_url="https://www.linkedin.com/oauth/v2/authorization",
    token_url="https://www.linkedin.com/oauth/v2/accessToken",
    profile_url="https://api.linkedin.com/v2/userinfo",
    issuer="https://www.linkedin.com/oauth",
    scope=("openid", "profile", "email"),
    profile=ProfileFields(
        provider_key=("sub", "id"),
        username="vanityName",
        first_name=("given_name", "localizedFirstName"),
        last_name=("family_name", "localizedLastName"),
        full_name="name",
        email="email",
        email_verified="email_verified",
        avatar_url="picture",
    ),
    property_rules=(PropertyRule("emailURL", "url"), PropertyRule("photoURL", "url")),
    api_base="https://api.linkedin.com/v2/",
    revocation_url="https://www.linkedin.com/oauth/v2/revoke",
    docs="""\
Create an app in the [LinkedIn Developer Portal](https://www.linkedin.com/developers/apps), add
the product *Sign In with LinkedIn using OpenID Connect* and the callback under *Authorized
redirect URLs*. The profile is LinkedIn's OpenID Connect userinfo, with `email_verified`.

Apps still on the legacy member API (`apiURL: https://api.linkedin.com/v2/me`, with scopes
`r_liteprofile r_emailaddress`) get the names from `localizedFirstName`/`localizedLastName`,
else from `firstName.localized` / `lastName.localized` in the member's `preferredLocale`
(e.g. `en_US`), and `username` from `vanityName` (with `r_basicprofile`). They name the two
extra calls that API needs in `customProperties`; each is
made only when the field is missing from the profile:

* `emailURL`: e.g.
  `https://api.linkedin.com/v2/emailAddress?q=members&projection=(elements*(handle~))`; the
  address is `elements[0]["handle~"].emailAddress` (not said to be verified).
* `photoURL`: e.g.
  `https://api.linkedin.com/v2/me?projection=(id,profilePicture(displayImage~:playableStreams))`;
  the largest image is taken.

Both must be https addresses: the access token is sent there. When such a call fails, the
profile comes without that field.
""",
)


def localized_name(raw: Any, field: str) -> str | None:
    """A legacy ``/v2/me`` name: ``<field>.localized`` in the ``<field>.preferredLocale``
    (``language_COUNTRY``), else its only entry."""
    localized = lookup(raw, f"{field}.localized")
    if not isinstance(localized, Mapping) or not localized:
        return None
    language = first_text(raw, f"{field}.preferredLocale.language")
    country = first_text(raw, f"{field}.preferredLocale.country")
    if language is not None:
        key = f"{language}_{country}" if country is not None else language
        if key in localized:
            return as_text(localized[key])
    if len(localized) == 1:
        return as_text(next(iter(localized.values())))
    return None


def largest_image(answer: Any) -> str | None:
    """The last (largest) image of a legacy ``displayImage~`` projection."""
    images = lookup(answer, "profilePicture.displayImage~.elements")
    if not isinstance(images, list):
        return None
    for image in reversed(images):
        if isinstance(image, Mapping):
            url = first_text(image, "identifiers.0.identifier")
            if url is not None:
                return url
    return None


@dataclass(frozen=True, slots=True)
class LinkedInOptions:
    """The ``customProperties`` only LinkedIn reads (their form is checked by :data:`FACTS`)."""

    #: ``emailURL``: the legacy API's e-mail address call.
    email_url: str | None
    #: ``photoURL``: the legacy API's profile picture call.
    photo_url: str | None


class LinkedInHooks(ProviderHooks):
    """Reads the legacy member API's localized names and makes the extra e-mail and photo
    calls that API needs (``customProperties.emailURL``/``photoURL``)."""

    __slots__ = ()

    def read_options(self, read: PropertyReader) -> LinkedInOptions:
        return LinkedInOptions(email_url=read.text("emailURL"), photo_url=read.text("photoURL"))

    def read_profile(
        self, provider: HookedProvider, raw: Any, info: OAuth2Info, profile: SocialProfile
    ) -> SocialProfile:
        first = profile.first_name or localized_name(raw, "firstName")
        last = profile.last_name or localized_name(raw, "lastName")
        if (first, last) != (profile.first_name, profile.last_name):
            profile = dataclasses.replace(profile, first_name=first, last_name=last)
        return profile

    def complete_profile(
        self, provider: HookedProvider, info: OAuth2Info, profile: SocialProfile
    ) -> SocialProfile:
        options = provider.options.own_as(LinkedInOptions)
        email_url = options.email_url
        if profile.email is None and email_url:
            answer = provider.optional_json(email_url, info, "e-mail request")
            email = first_text(answer, "elements.0.handle~.emailAddress")
            profile = dataclasses.replace(profile, email=email, email_verified=None)
        photo_url = options.photo_url
        if profile.avatar_url is None and photo_url:
            answer = provider.optional_json(photo_url, info, "photo request")
            profile = dataclasses.replace(profile, avatar_url=largest_image(answer))
        return profile


if TYPE_CHECKING:  # for type checkers, the class is what it is: a BuiltinProvider
    LinkedInProvider: TypeAlias = BuiltinProvider
else:
    LinkedInProvider = provider_class(
        FACTS,
        LinkedInHooks(),
        module=__name__,
        doc="Sign in with LinkedIn, also on the legacy member API (localized names, extra calls).",
    )
