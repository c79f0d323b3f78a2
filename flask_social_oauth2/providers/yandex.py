"""Yandex ID: ``login.yandex.ru/info``, with ``Authorization: OAuth <token>``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import Param, ProviderFacts

FACTS: Final = ProviderFacts(
    name="yandex",
    title="Yandex",
    class_name="YandexProvider",
    authorization_url="https://oauth.yandex.com/authorize",
    token_url="https://oauth.yandex.com/token",
    profile_url="https://login.yandex.ru/info",
    profile=ProfileFields(
        provider_key="id",
        username="login",
        first_name="first_name",
        last_name="last_name",
        full_name=("display_name", "real_name"),
        email="default_email",
        avatar_url="default_avatar_id",
        avatar_url_template="https://avatars.yandex.net/get-yapic/{value}/islands-200",
        avatar_is_placeholder="is_avatar_empty",
    ),
    profile_params=(Param("format", "json"),),
    api_token_scheme="OAuth",
    api_base="https://login.yandex.ru/",
    docs="""\
Create an app on [oauth.yandex.com](https://oauth.yandex.com/) with the rights
`login:info` (and `login:email`, `login:avatar` as needed); Yandex grants the rights chosen
there, so the block needs no `scope`. The profile is `GET https://login.yandex.ru/info?format=json`
with `Authorization: OAuth <token>` as Yandex documents it (not `Bearer`, and never the
insecure `oauth_token` parameter). `username` is the `login`, `full_name` the `display_name`,
else the `real_name`; `email` the `default_email`, which Yandex does not call verified. The
avatar is built from `default_avatar_id`
(`https://avatars.yandex.net/get-yapic/<id>/islands-200`), and is `None` when Yandex says the
user has none (`is_avatar_empty`).
""",
)
