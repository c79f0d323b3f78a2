"""TikTok Login Kit (v2): ``/v2/user/info/``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import Param, ProviderFacts, Quirk

#: The fields asked for when ``customProperties.fields`` is not set.
DEFAULT_FIELDS: Final = "open_id,union_id,avatar_url,display_name"

FACTS: Final = ProviderFacts(
    name="tiktok",
    title="TikTok",
    class_name="TikTokProvider",
    authorization_url="https://www.tiktok.com/v2/auth/authorize/",
    token_url="https://open.tiktokapis.com/v2/oauth/token/",
    profile_url="https://open.tiktokapis.com/v2/user/info/",
    scope=("user.info.basic",),
    scope_separator=",",
    profile=ProfileFields(
        provider_key=("data.user.open_id", "token:open_id"),
        username="data.user.username",
        full_name="data.user.display_name",
        avatar_url="data.user.avatar_url",
    ),
    profile_params=(Param("fields", DEFAULT_FIELDS, "fields"),),
    quirks=frozenset({Quirk.CLIENT_KEY, Quirk.ERROR_CODE_NOT_OK_IS_ERROR}),
    api_base="https://open.tiktokapis.com/v2/",
    revocation_url="https://open.tiktokapis.com/v2/oauth/revoke/",
    docs=f"""\
Create an app with *Login Kit* on [TikTok for Developers](https://developers.tiktok.com/apps/);
its *client key* is the `clientID`. TikTok names the client id `client_key`: it is sent as
`client_key` in the authorization, token and refresh requests. The profile is
`GET /v2/user/info/` with `fields` (`customProperties.fields`, default `{DEFAULT_FIELDS}`);
the user is `data.user`, and every answer carries an `error` object whose `code` is `"ok"`
on success: any other code fails the sign-in. `provider_key` is the `open_id` (one per app;
`union_id` is shared by a developer's apps and stays in `raw`). `username` needs the
`user.info.profile` scope and `username` in `fields`. TikTok gives no e-mail address.
Scopes are separated by commas.
""",
)
