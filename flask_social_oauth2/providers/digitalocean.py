"""DigitalOcean: the account (``/v2/account``)."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="digitalocean",
    title="DigitalOcean",
    class_name="DigitalOceanProvider",
    authorization_url="https://cloud.digitalocean.com/v1/oauth/authorize",
    token_url="https://cloud.digitalocean.com/v1/oauth/token",
    profile_url="https://api.digitalocean.com/v2/account",
    scope=("read",),
    profile=ProfileFields(
        provider_key="account.uuid",
        full_name="account.name",
        email="account.email",
        email_verified="account.email_verified",
    ),
    api_base="https://api.digitalocean.com/v2/",
    revocation_url="https://cloud.digitalocean.com/v1/oauth/revoke",
    docs="""\
Register an OAuth application under *API → OAuth Applications* in the
[DigitalOcean control panel](https://cloud.digitalocean.com/account/api/applications). The
profile is `GET /v2/account`; `provider_key` is the account's `uuid` (DigitalOcean: "should be
used to canonically identify a user"), `email_verified` its `email_verified`. DigitalOcean
accounts have no user name or picture. The token answer also carries `info` (name, e-mail,
uuid) in `info.params`.
""",
)
