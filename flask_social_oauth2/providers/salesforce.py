"""Salesforce: the identity URL the token answer names."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import Param, ProviderFacts

FACTS: Final = ProviderFacts(
    name="salesforce",
    title="Salesforce",
    class_name="SalesforceProvider",
    authorization_url="https://login.salesforce.com/services/oauth2/authorize",
    token_url="https://login.salesforce.com/services/oauth2/token",
    scope=("id",),
    profile=ProfileFields(
        provider_key=("user_id", "id"),
        username="username",
        first_name="first_name",
        last_name="last_name",
        full_name="display_name",
        email="email",
        email_verified="email_verified",
        avatar_url="photos.picture",
    ),
    profile_params=(Param("format", "json"),),
    profile_url_from_token_answer="id",
    api_base_from_token_answer="instance_url",
    revocation_url="https://login.salesforce.com/services/oauth2/revoke",
    docs="""\
Create a *connected app* (or an *external client app*) with OAuth settings in Salesforce
Setup. Sign-in goes to `login.salesforce.com`; use `test.salesforce.com` for a sandbox or
your org's My Domain host (`https://<MyDomainName>.my.salesforce.com`) in both addresses.
The token answer names the user's *identity URL* (`id`), which is the profile: it is read
with the bearer token and `format=json` (it must be an https address). `provider_key` is the
`user_id`; `username` the Salesforce user name, `full_name` the `display_name`,
`email_verified` what Salesforce says. The token answer's `instance_url` is the base of every
REST call for this user (`info.params["instance_url"]`): Salesforce has no fixed API host.
""",
)
