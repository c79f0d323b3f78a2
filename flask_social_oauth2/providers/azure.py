"""Azure AD / Microsoft Entra ID under Flask-Dance's name: an alias of ``microsoft``."""

from __future__ import annotations

import dataclasses
from typing import Final

from . import microsoft

FACTS: Final = dataclasses.replace(
    microsoft.FACTS,
    name="azure",
    title="Azure (alias of Microsoft)",
    class_name="AzureProvider",
    docs="""\
`azure` is the same provider as [`microsoft`](#microsoft-entra-id) under the name Flask-Dance
uses: the same endpoints, profile mapping and checks. The tenant is in the path of both
endpoints (`common`, `organizations`, `consumers` or a tenant id). With the `openid` scope the
issuer is derived from `accessTokenURL` (`https://login.microsoftonline.com/<tenant>/v2.0`);
the multi-tenant endpoints' discovery document names the issuer with a `{tenantid}`
placeholder, which is filled with the ID token's `tid` claim before `iss` is compared.
""",
)
