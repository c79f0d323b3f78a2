"""Heroku: the Platform API account, with the versioned Accept header."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="heroku",
    title="Heroku",
    class_name="HerokuProvider",
    authorization_url="https://id.heroku.com/oauth/authorize",
    token_url="https://id.heroku.com/oauth/token",
    profile_url="https://api.heroku.com/account",
    scope=("identity",),
    profile=ProfileFields(provider_key="id", full_name="name", email="email"),
    api_headers={"Accept": "application/vnd.heroku+json; version=3"},
    api_base="https://api.heroku.com/",
    docs="""\
Register an OAuth client under *Account settings → Applications* in the
[Heroku dashboard](https://dashboard.heroku.com/account/applications). Every Platform API call
must name the API version in its `Accept` header (`application/vnd.heroku+json; version=3`),
which the profile call sends. The profile is `GET /account`. Heroku's `verified` flag means
verified *billing* information, not a verified address, so `email_verified` is `None`.
`identity` is enough to sign in; ask for `global` or `read`/`write` to use the API.
""",
)
