"""Nylas (legacy v2 hosted authentication): the connected account."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="nylas",
    title="Nylas (legacy v2)",
    class_name="NylasProvider",
    authorization_url="https://api.nylas.com/oauth/authorize",
    token_url="https://api.nylas.com/oauth/token",
    profile_url="https://api.nylas.com/account",
    scope=("email",),
    scope_separator=",",
    profile=ProfileFields(
        provider_key=("id", "token:account_id"), full_name="name", email="email_address"
    ),
    api_base="https://api.nylas.com/",
    docs="""\
**Legacy, status unconfirmed.** These are the v2 settings Flask-Dance ships
(`api.nylas.com`); whether v2 still answers could not be confirmed. Nylas v3 is not a sign-in
provider: its hosted OAuth creates *grants* to a user's mailbox
(`https://api.us.nylas.com/v3/connect/auth`), so use it through its own SDK. The v2 profile
is the connected account (`GET /account`): `provider_key` is its `id` (the token answer's
`account_id`), `email` the `email_address`, which Nylas does not call verified.
""",
)
