"""Mastodon: the account of the token on the configured server."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="mastodon",
    title="Mastodon",
    class_name="MastodonProvider",
    authorization_url="https://${MASTODON_HOST}/oauth/authorize",
    token_url="https://${MASTODON_HOST}/oauth/token",
    profile_url_from_token_url=((r"([^:/]+://[^/]+).*", r"\1/api/v1/accounts/verify_credentials"),),
    profile_url_shown="https://<server>/api/v1/accounts/verify_credentials",
    scope=("read:accounts",),
    profile=ProfileFields(
        provider_key="id", username="username", full_name="display_name", avatar_url="avatar"
    ),
    docs="""\
Each block is one Mastodon server. Register the app on that server, either under
*Preferences → Development → New application* or with `POST /api/v1/apps`, and use the
`client_id`/`client_secret` it returns. The profile address is
`/api/v1/accounts/verify_credentials` on the host of `accessTokenURL`. The account `id` is
unique on that server only, which is why users are keyed by provider name and id. Mastodon
gives no e-mail address; `full_name` is the display name, `username` the user name. Use the
scope `profile` instead of `read:accounts` on Mastodon 4.3 and later.
""",
)
