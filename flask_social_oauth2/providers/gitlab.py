"""GitLab (gitlab.com or self-managed): the current user."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="gitlab",
    title="GitLab",
    class_name="GitLabProvider",
    authorization_url="https://gitlab.com/oauth/authorize",
    token_url="https://gitlab.com/oauth/token",
    profile_url_from_token_url=(
        (r"([^:/]+://[^/]+)(.*)/oauth/token", r"\1\2/api/v4/user"),
        (r"([^:/]+://[^/]+).*", r"\1/api/v4/user"),
    ),
    profile_url_shown="https://<instance>/api/v4/user",
    scope=("read_user",),
    profile=ProfileFields(
        provider_key="id",
        username="username",
        full_name="name",
        email="email",
        avatar_url="avatar_url",
    ),
    api_base="https://gitlab.com/api/v4/",
    revocation_url="https://gitlab.com/oauth/revoke",
    docs="""\
Add an application under *Edit profile → Applications* on gitlab.com or your instance, with
the `read_user` scope. The profile address is `/api/v4/user` on the instance (and relative
root) of `accessTokenURL`, so a self-managed GitLab needs no `apiURL`:
`https://git.example.com/gitlab/oauth/token` gives
`https://git.example.com/gitlab/api/v4/user`. (The API base and revocation address of the
facts are gitlab.com's.)
""",
)
