"""NAVER: ``/v1/nid/me``, the user wrapped in ``response``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="naver",
    title="NAVER",
    class_name="NaverProvider",
    authorization_url="https://nid.naver.com/oauth2.0/authorize",
    token_url="https://nid.naver.com/oauth2.0/token",
    profile_url="https://openapi.naver.com/v1/nid/me",
    profile=ProfileFields(
        provider_key="response.id",
        full_name=("response.name", "response.nickname"),
        email="response.email",
        avatar_url="response.profile_image",
    ),
    api_base="https://openapi.naver.com/",
    docs="""\
Register an application for *네이버 로그인* (NAVER Login) on [NAVER Developers](https://developers.naver.com/apps/)
and choose the profile items there (NAVER takes no `scope`). The profile is
`GET /v1/nid/me`, which wraps the user in `response` (`{"resultcode": "00", "message":
"success", "response": {...}}`): `provider_key` is `response.id` (one per application),
`full_name` the name, else the nickname. NAVER sends `expires_in` as a string, which is read
as a number. NAVER does not say whether the address is verified.
""",
)
