"""GitLab (gitlab.com or self-managed): the current user."""

from __future__ import annotations

from typing import ClassVar, Final

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Settings
from ._common import origin, token_url_path

_ENDPOINT_SUFFIX: Final = "/oauth/token"


class GitLabProvider(OAuth2Provider):
    """Sign in with GitLab.

    The profile is ``GET /api/v4/user`` (scope ``read_user``) on the GitLab instance of
    ``accessTokenURL``, so a self-managed instance needs no ``apiURL``: the token URL
    ``https://<host>[/<relative root>]/oauth/token`` gives
    ``https://<host>[/<relative root>]/api/v4/user``.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://gitlab.com/api/v4/user"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="id",
        full_name=("name", "username"),
        email="email",
        avatar_url="avatar_url",
    )

    @classmethod
    def default_profile_url_for(cls, settings: OAuth2Settings) -> str | None:
        path = token_url_path(settings)
        root = path[: -len(_ENDPOINT_SUFFIX)] if path.endswith(_ENDPOINT_SUFFIX) else ""
        return f"{origin(settings.access_token_url)}{root}/api/v4/user"
