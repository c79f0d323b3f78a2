"""Zoho: the user's data centre decides the token and profile server."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import CallbackTokenServer, ProviderFacts

#: The accounts servers of Zoho's data centres (multi-DC documentation).
ACCOUNTS_SERVERS: Final = frozenset(
    {
        "https://accounts.zoho.com",
        "https://accounts.zoho.eu",
        "https://accounts.zoho.in",
        "https://accounts.zoho.com.au",
        "https://accounts.zoho.jp",
        "https://accounts.zohocloud.ca",
        "https://accounts.zoho.sa",
        "https://accounts.zoho.uk",
        "https://accounts.zoho.com.cn",
    }
)

FACTS: Final = ProviderFacts(
    name="zoho",
    title="Zoho",
    class_name="ZohoProvider",
    authorization_url="https://accounts.zoho.com/oauth/v2/auth",
    token_url="https://accounts.zoho.com/oauth/v2/token",
    profile_url="https://accounts.zoho.com/oauth/user/info",
    scope=("AaaServer.profile.READ",),
    scope_separator=",",
    profile=ProfileFields(
        provider_key="ZUID",
        first_name="First_Name",
        last_name="Last_Name",
        full_name="Display_Name",
        email="Email",
    ),
    api_token_scheme="Zoho-oauthtoken",
    callback_token_server=CallbackTokenServer(
        parameter="accounts-server",
        servers=ACCOUNTS_SERVERS,
        token_path="/oauth/v2/token",
        profile_path="/oauth/user/info",
    ),
    api_base_from_token_answer="api_domain",
    init_authorization_params={"access_type": "online"},
    docs="""\
Register a *server-based application* in the [Zoho API console](https://api-console.zoho.com/)
and enable *multi-DC* for it. Zoho keeps each user in one data centre: the callback names it
(`accounts-server=https://accounts.zoho.eu`), and the token request goes to that server's
`/oauth/v2/token`, the profile request to its `/oauth/user/info` (unless `apiURL` is set). The
server must be one of Zoho's data centres (`accounts.zoho.com`, `.eu`, `.in`, `.com.au`,
`.jp`, `.sa`, `.uk`, `.com.cn`, `accounts.zohocloud.ca`), the origin of `accessTokenURL` or
one listed in `customProperties.accountsServers` (space separated); any other is refused with
400 before the code or the secret is sent anywhere. The server is kept in
`info.params["accounts-server"]`, and `refresh()` goes to the same server. API calls send
`Authorization: Zoho-oauthtoken <token>`; the token answer's `api_domain` is the user's API
base (`https://www.zohoapis.eu`). The profile's member names (`ZUID`, `First_Name`,
`Last_Name`, `Display_Name`, `Email`) are those peer libraries read: Zoho's documentation
shows no sample. Zoho does not say whether the address is verified. `access_type=offline`
(with `prompt=consent`) gives a refresh token, only at the first consent.
""",
)
