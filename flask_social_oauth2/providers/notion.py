"""Notion public integrations: the user is in the token answer."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts, Quirk

FACTS: Final = ProviderFacts(
    name="notion",
    title="Notion",
    class_name="NotionProvider",
    authorization_url="https://api.notion.com/v1/oauth/authorize",
    token_url="https://api.notion.com/v1/oauth/token",
    client_auth="client_secret_basic",
    profile=ProfileFields(
        provider_key="id",
        full_name="name",
        email="person.email",
        avatar_url="avatar_url",
    ),
    profile_in_token_answer="owner.user",
    quirks=frozenset({Quirk.JSON_TOKEN_REQUEST}),
    api_base="https://api.notion.com/v1/",
    authorization_params={"owner": "user"},
    docs="""\
Create a *public* integration in [Notion's integrations dashboard](https://www.notion.so/profile/integrations)
and add the redirect URI. Notion has no scopes; the authorization request carries
`owner=user` (unless `authorizationParams` says otherwise). The token request is a JSON body
with HTTP Basic client authentication, as Notion documents it. **There is no profile
request**: Notion sends the user who installed the integration in the token answer
(`owner.user`), which is the profile (`raw`); the workspace (`workspace_id`,
`workspace_name`, `bot_id`) stays in `info.params`. `email` is `person.email`, which Notion
does not call verified. A token answer without `owner.user` (an integration owned by a
workspace) is a `ProfileRetrievalError`. API calls also need a `Notion-Version` header.
Refreshing rotates the refresh token.
""",
)
