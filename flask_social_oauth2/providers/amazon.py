"""Login with Amazon: the customer profile."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="amazon",
    title="Amazon",
    class_name="AmazonProvider",
    authorization_url="https://www.amazon.com/ap/oa",
    token_url="https://api.amazon.com/auth/o2/token",
    profile_url="https://api.amazon.com/user/profile",
    scope=("profile",),
    profile=ProfileFields(provider_key="user_id", full_name="name", email="email"),
    api_base="https://api.amazon.com/",
    docs="""\
Register at the [Login with Amazon console](https://developer.amazon.com/loginwithamazon/console/site/lwa/overview.html)
(Security Profile → Web Settings → Allowed Return URLs). The profile has `user_id`, `name` and
`email` only: no first/last name, no picture, and nothing says whether the address is verified.
""",
)
