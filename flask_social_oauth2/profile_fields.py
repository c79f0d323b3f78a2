"""Declarative mapping of a provider's profile JSON onto :class:`SocialProfile`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .settings import SocialProfile

#: A dotted path into the JSON (``"picture.data.url"``), or several tried in order.
FieldPath = str | tuple[str, ...] | None


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


def first_text(data: Any, paths: FieldPath) -> str | None:
    """The first non-empty value among ``paths``, as a string; numbers become strings."""
    if paths is None:
        return None
    for path in (paths,) if isinstance(paths, str) else paths:
        value = lookup(data, path)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                continue
            return str(int(value)) if value.is_integer() else str(value)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


@dataclass(frozen=True, slots=True)
class ProfileFields:
    """Where each :class:`SocialProfile` field is found in a provider's JSON."""

    provider_key: FieldPath
    first_name: FieldPath = None
    last_name: FieldPath = None
    full_name: FieldPath = None
    email: FieldPath = None
    avatar_url: FieldPath = None

    def extract(self, provider_id: str, raw: Mapping[str, Any]) -> SocialProfile | None:
        """The profile, or ``None`` when the JSON has no user id."""
        key = first_text(raw, self.provider_key)
        if key is None:
            return None
        return SocialProfile(
            provider_id=provider_id,
            provider_key=key,
            first_name=first_text(raw, self.first_name),
            last_name=first_text(raw, self.last_name),
            full_name=first_text(raw, self.full_name),
            email=first_text(raw, self.email),
            avatar_url=first_text(raw, self.avatar_url),
            raw=raw,
        )


#: OpenID Connect claim names, with ``id``/``login`` where ``sub`` is absent.
OPENID_FIELDS = ProfileFields(
    provider_key=("sub", "id", "login"),
    first_name="given_name",
    last_name="family_name",
    full_name="name",
    email="email",
    avatar_url="picture",
)
