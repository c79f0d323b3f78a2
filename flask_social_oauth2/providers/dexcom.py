"""Dexcom: an API without a profile; the user id of a v3 data answer."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="dexcom",
    title="Dexcom",
    class_name="DexcomProvider",
    authorization_url="https://api.dexcom.com/v2/oauth2/login",
    token_url="https://api.dexcom.com/v2/oauth2/token",
    profile_url="https://api.dexcom.com/v3/users/self/dataRange",
    scope=("offline_access",),
    profile=ProfileFields(provider_key="userId"),
    no_profile_endpoint=True,
    api_base="https://api.dexcom.com/v3/",
    docs="""\
Register an app on the [Dexcom developer portal](https://developer.dexcom.com/). **Dexcom has
no profile endpoint**: it gives no name, e-mail address or picture. The only user identifier
its API gives is the `userId` of every v3 answer, so the "profile" is
`GET /v3/users/self/dataRange` and carries only `provider_key` (`userId`); every other field is
`None` and `raw` is the data-range answer. `offline_access` is the only scope. Authorization
stays on v2 while the data API is v3. For the sandbox use
`https://sandbox-api.dexcom.com/...` in all three addresses (`apiURL` too).
""",
)
