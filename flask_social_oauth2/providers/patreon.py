"""Patreon: the API v2 identity of the signed-in user."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import Param, ProviderFacts

#: The user attributes asked for when ``customProperties.userFields`` is not set.
DEFAULT_USER_FIELDS: Final = (
    "email,is_email_verified,first_name,last_name,full_name,vanity,image_url"
)

FACTS: Final = ProviderFacts(
    name="patreon",
    title="Patreon",
    class_name="PatreonProvider",
    authorization_url="https://www.patreon.com/oauth2/authorize",
    token_url="https://www.patreon.com/api/oauth2/token",
    profile_url="https://www.patreon.com/api/oauth2/v2/identity",
    scope=("identity", "identity[email]"),
    profile=ProfileFields(
        provider_key="data.id",
        username="data.attributes.vanity",
        first_name="data.attributes.first_name",
        last_name="data.attributes.last_name",
        full_name="data.attributes.full_name",
        email="data.attributes.email",
        email_verified="data.attributes.is_email_verified",
        avatar_url=("data.attributes.image_url", "data.attributes.thumb_url"),
    ),
    profile_params=(Param("fields[user]", DEFAULT_USER_FIELDS, "userFields"),),
    api_base="https://www.patreon.com/api/oauth2/v2/",
    docs=f"""\
Register a client on the [Patreon clients page](https://www.patreon.com/portal/registration/register-clients)
(API version 2). API v2 returns only the attributes a request names: the identity call sends
`fields[user]`, by default `{DEFAULT_USER_FIELDS}`;
`customProperties.userFields` overrides the list. The answer is a JSON:API document (the user
under `data`, its fields under `data.attributes`); `username` is the `vanity` name. The e-mail
address needs the scope `identity[email]`.
""",
)
