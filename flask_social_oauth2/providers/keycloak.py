"""Keycloak: the realm's OpenID Connect userinfo."""

from __future__ import annotations

import re
from typing import ClassVar, Final

from ..errors import ConfigurationProblem
from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Settings
from ._common import origin, token_url_path

_REALM_PATH: Final = re.compile(r"\A(?P<realm>(?:/[^/]+)*?/realms/[^/]+)(?:/|\Z)")


class KeycloakProvider(OAuth2Provider):
    """Sign in with Keycloak.

    Keycloak is self-hosted and per realm: without ``apiURL`` the profile address is
    ``/realms/<realm>/protocol/openid-connect/userinfo`` on the host of ``accessTokenURL``,
    the realm (and any path prefix before it, such as the ``/auth`` of older releases) taken
    from that URL. A token URL without ``/realms/<realm>`` then needs ``apiURL``. The claims
    are OpenID Connect's; ``full_name`` falls back to ``preferred_username``.
    """

    __slots__ = ()

    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="sub",
        first_name="given_name",
        last_name="family_name",
        full_name=("name", "preferred_username"),
        email="email",
        avatar_url="picture",
    )
    openid_connect: ClassVar[bool] = True
    issuer_from_token_url = (r"(https?://.+?/realms/[^/]+)/protocol/openid-connect/token", r"\1")

    @classmethod
    def default_profile_url_for(cls, settings: OAuth2Settings) -> str | None:
        match = _REALM_PATH.match(token_url_path(settings))
        if match is None:
            return None
        realm = match.group("realm")
        return f"{origin(settings.access_token_url)}{realm}/protocol/openid-connect/userinfo"

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        problems = []
        for problem in super().settings_problems(settings):
            if problem.key == "apiURL":
                problem = ConfigurationProblem(
                    None,
                    "apiURL",
                    "is required: accessTokenURL has no /realms/<realm>/ path to derive the"
                    " userinfo address from",
                )
            problems.append(problem)
        return problems
