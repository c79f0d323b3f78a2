"""Bitbucket Cloud: the current user and their e-mail addresses."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import EmailList, ProviderFacts

FACTS: Final = ProviderFacts(
    name="bitbucket",
    title="Bitbucket",
    class_name="BitbucketProvider",
    authorization_url="https://bitbucket.org/site/oauth2/authorize",
    token_url="https://bitbucket.org/site/oauth2/access_token",
    profile_url="https://api.bitbucket.org/2.0/user",
    scope=("account", "email"),
    client_auth="client_secret_basic",
    profile=ProfileFields(
        provider_key=("uuid", "account_id"),
        username="nickname",
        full_name="display_name",
        avatar_url="links.avatar.href",
    ),
    email_list=EmailList(
        entries="values", address="email", primary="is_primary", verified="is_confirmed"
    ),
    api_base="https://api.bitbucket.org/2.0/",
    docs="""\
Add an *OAuth consumer* in your workspace settings
(`https://bitbucket.org/<workspace>/workspace/settings/api`), tick *This is a private consumer*
and the *Account: Email* and *Account: Read* permissions. The user's key is the account `uuid`,
`username` the `nickname`. `/2.0/user` has no e-mail address, so it is read from
`/2.0/user/emails` (the primary confirmed entry, so `email_verified` is true);
`customProperties.emailsURL` overrides that address. The token endpoint is called with HTTP
Basic client authentication.
""",
)
