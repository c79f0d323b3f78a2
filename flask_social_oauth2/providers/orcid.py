"""ORCID (and its sandbox): OpenID Connect userinfo."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

_HOST: Final = r"(https://(?:sandbox\.)?orcid\.org)"

FACTS: Final = ProviderFacts(
    name="orcid",
    title="ORCID",
    class_name="ORCIDProvider",
    authorization_url="https://orcid.org/oauth/authorize",
    token_url="https://orcid.org/oauth/token",
    profile_url_from_token_url=((rf"{_HOST}/oauth/token", r"\1/oauth/userinfo"),),
    profile_url_shown="https://orcid.org/oauth/userinfo (sandbox: https://sandbox.orcid.org/...)",
    api_url_hint="accessTokenURL is not ORCID's or its sandbox's token endpoint",
    issuer_from_token_url=(rf"{_HOST}/oauth/token", r"\1"),
    scope=("openid",),
    profile=ProfileFields(
        provider_key=("sub", "token:orcid"),
        first_name="given_name",
        last_name="family_name",
        full_name=("name", "token:name"),
    ),
    api_base="https://pub.orcid.org/v3.0/",
    docs="""\
Register a public API client under *Developer tools* in your [ORCID record](https://orcid.org/developer-tools)
(Member API clients work the same). ORCID speaks OpenID Connect: with `openid` the ID token is
verified against `https://orcid.org` and the profile is `GET /oauth/userinfo`. `provider_key` is
the bare ORCID iD (`0000-0002-2601-8132`); ORCID's userinfo has no e-mail address and no
picture. **Sandbox**: use `https://sandbox.orcid.org/oauth/authorize` and
`https://sandbox.orcid.org/oauth/token`; the issuer (`https://sandbox.orcid.org`) and the
userinfo address follow from `accessTokenURL`. ORCID access tokens last about 20 years.
""",
)
