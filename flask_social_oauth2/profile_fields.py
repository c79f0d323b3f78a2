"""Declarative mapping of a provider's profile JSON onto :class:`SocialProfile`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from .settings import SocialProfile

#: A dotted path into the JSON (``"picture.data.url"``), or several tried in order. A path
#: that starts with ``token:`` is read from the token answer instead (``"token:user_id"``).
FieldPath = str | tuple[str, ...] | None

_TOKEN_PREFIX: Final = "token:"  # noqa: S105 - a path prefix
_TRUE: Final = frozenset({"true", "1"})
_FALSE: Final = frozenset({"false", "0"})


def lookup(data: Any, path: str) -> Any:
    """The value at a dotted ``path`` in ``data`` (digits index lists), or ``None``."""
    value = data
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _paths(paths: FieldPath) -> tuple[str, ...]:
    if paths is None:
        return ()
    return (paths,) if isinstance(paths, str) else paths


def _values(data: Any, paths: FieldPath, token: Mapping[str, Any]) -> list[Any]:
    found = []
    for path in _paths(paths):
        if path.startswith(_TOKEN_PREFIX):
            found.append(lookup(token, path[len(_TOKEN_PREFIX) :]))
        else:
            found.append(lookup(data, path))
    return found


def as_text(value: Any) -> str | None:
    """``value`` as a stripped non-empty string (numbers become strings), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def as_flag(value: Any) -> bool | None:
    """A provider's boolean: ``true``/``false``, the strings ``"true"``/``"false"`` (Apple,
    some OpenID Connect providers) or ``1``/``0`` (Zoom); anything else is ``None``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    return None


def first_text(data: Any, paths: FieldPath, token: Mapping[str, Any] | None = None) -> str | None:
    """The first non-empty value among ``paths``, as a string; numbers become strings."""
    for value in _values(data, paths, token or {}):
        text = as_text(value)
        if text is not None:
            return text
    return None


def first_flag(data: Any, paths: FieldPath, token: Mapping[str, Any] | None = None) -> bool | None:
    """The first boolean among ``paths`` (see :func:`as_flag`), else ``None``."""
    for value in _values(data, paths, token or {}):
        flag = as_flag(value)
        if flag is not None:
            return flag
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileFields:
    """Where each :class:`SocialProfile` field is found in a provider's JSON.

    :param provider_key: The user's immutable id (required in every answer).
    :param username: The provider's handle (a login, a screen name), never a display name.
    :param full_name: The display name; without one the profile joins first and last name.
    :param email_verified: Where the provider says whether the e-mail address is verified, or
        ``True``/``False`` when its documentation says so for every address it gives.
    :param avatar_url_template: For providers that send only a picture's id: the picture's
        address, ``{key}`` (the user id) and ``{value}`` (what ``avatar_url`` found) filled in.
        A ``/`` in the value is kept (Yandex's ids have one); a ``..`` segment drops the avatar.
    :param email_valid: Where the provider says whether the address still works (Kakao's
        ``is_email_valid``): when it says no, ``email_verified`` is ``False``.
    :param avatar_is_placeholder: Where the provider says the user has no picture of their
        own (Yandex's ``is_avatar_empty``): then ``avatar_url`` is ``None``.
    """

    provider_key: FieldPath
    username: FieldPath = None
    first_name: FieldPath = None
    last_name: FieldPath = None
    full_name: FieldPath = None
    email: FieldPath = None
    email_verified: FieldPath | bool = None
    avatar_url: FieldPath = None
    avatar_url_template: str | None = None
    email_valid: FieldPath = None
    avatar_is_placeholder: FieldPath = None

    def extract(
        self,
        provider_id: str,
        raw: Mapping[str, Any],
        token: Mapping[str, Any] | None = None,
    ) -> SocialProfile | None:
        """The profile, or ``None`` when the JSON (and the token answer) has no user id.

        :param token: The other fields of the token answer, for ``token:`` paths.
        """
        params = token or {}
        key = first_text(raw, self.provider_key, params)
        if key is None:
            return None
        email = first_text(raw, self.email, params)
        verified: bool | None = None
        if email is not None:
            if isinstance(self.email_verified, bool):
                verified = self.email_verified
            else:
                verified = first_flag(raw, self.email_verified, params)
            if verified and first_flag(raw, self.email_valid, params) is False:
                verified = False
        avatar = first_text(raw, self.avatar_url, params)
        if first_flag(raw, self.avatar_is_placeholder, params) is True:
            avatar = None
        if avatar is not None and self.avatar_url_template is not None:
            avatar = self._avatar_from_template(key, avatar)
        return SocialProfile(
            provider_id=provider_id,
            provider_key=key,
            username=first_text(raw, self.username, params),
            first_name=first_text(raw, self.first_name, params),
            last_name=first_text(raw, self.last_name, params),
            full_name=first_text(raw, self.full_name, params),
            email=email,
            email_verified=verified,
            avatar_url=avatar,
            raw=raw,
        )

    def _avatar_from_template(self, key: str, value: str) -> str | None:
        assert self.avatar_url_template is not None
        if ".." in value.split("/"):
            return None
        return self.avatar_url_template.format(
            key=quote(key, safe=""), value=quote(value, safe="/")
        )


#: OpenID Connect claim names, with ``id``/``login`` where ``sub`` is absent.
OPENID_FIELDS: Final = ProfileFields(
    provider_key=("sub", "id", "login"),
    username="preferred_username",
    first_name="given_name",
    last_name="family_name",
    full_name="name",
    email="email",
    email_verified="email_verified",
    avatar_url="picture",
)
