"""Kakao: ``/v2/user/me``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="kakao",
    title="Kakao",
    class_name="KakaoProvider",
    authorization_url="https://kauth.kakao.com/oauth/authorize",
    token_url="https://kauth.kakao.com/oauth/token",
    profile_url="https://kapi.kakao.com/v2/user/me",
    issuer="https://kauth.kakao.com",
    scope_separator=",",
    profile=ProfileFields(
        provider_key="id",
        full_name=("kakao_account.profile.nickname", "kakao_account.name"),
        email="kakao_account.email",
        email_verified="kakao_account.is_email_verified",
        email_valid="kakao_account.is_email_valid",
        avatar_url="kakao_account.profile.profile_image_url",
    ),
    api_base="https://kapi.kakao.com/",
    docs="""\
Register an app on [Kakao Developers](https://developers.kakao.com/), enable *Kakao Login*,
add the redirect URI and choose the *consent items* (profile, e-mail, ...): Kakao's scopes are
those items, so the block needs no `scope` (a comma-separated list narrows them, e.g.
`profile_nickname,account_email`). A client secret is sent; enable it in the console. The
profile is `GET /v2/user/me`: `provider_key` is the numeric `id` as a string, `full_name` the
nickname. `email_verified` is Kakao's `is_email_verified`, and `False` when Kakao says the
address no longer works (`is_email_valid` false). Each `kakao_account` member is there only if
the user agreed to it. With OpenID Connect enabled in the console, add `openid` to the scope:
the ID token is then verified against `https://kauth.kakao.com`.
""",
)
