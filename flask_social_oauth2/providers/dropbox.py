"""Dropbox: the current account (an RPC endpoint called with POST)."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="dropbox",
    title="Dropbox",
    class_name="DropboxProvider",
    authorization_url="https://www.dropbox.com/oauth2/authorize",
    token_url="https://api.dropboxapi.com/oauth2/token",
    profile_url="https://api.dropboxapi.com/2/users/get_current_account",
    scope=("account_info.read",),
    profile=ProfileFields(
        provider_key="account_id",
        first_name="name.given_name",
        last_name="name.surname",
        full_name="name.display_name",
        email="email",
        email_verified="email_verified",
        avatar_url="profile_photo_url",
    ),
    profile_method="POST",
    profile_json_body="null",
    api_base="https://api.dropboxapi.com/2/",
    docs="""\
Create an app in the [Dropbox App Console](https://www.dropbox.com/developers/apps) and enable
the `account_info.read` permission. The profile call `users/get_current_account` is an RPC
endpoint: it is sent as `POST` with the body `null` (`Content-Type: application/json`), as
Dropbox requires.
""",
)
