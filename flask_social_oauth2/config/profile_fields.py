"""Declarative mapping of a provider's profile JSON onto :class:`SocialProfile`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple
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
    return _walk(data, tuple(path.split(".")))


def _walk(data: Any, parts: tuple[str, ...]) -> Any:
    value = data
    for part in parts:
        if type(value) is dict or isinstance(value, Mapping):  # a dict: no ABC check
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


#: A field's paths, split once: ``(read from the token answer, the path's parts)`` each.
_Plan = tuple[tuple[bool, tuple[str, ...]], ...]
#: Plans by field path: the paths are the providers' declared ones, a bounded set; the bound
#: only guards against a caller passing paths made per call.
_PLANS: dict[Any, _Plan] = {}
_MAX_PLANS: Final = 4096


def _plan(paths: FieldPath) -> _Plan:
    try:
        plan = _PLANS.get(paths)
    except TypeError:  # an unhashable sequence of paths: split it each time
        return _make_plan(paths)
    if plan is None:
        plan = _make_plan(paths)
        if len(_PLANS) < _MAX_PLANS:
            _PLANS[paths] = plan
    return plan


def _make_plan(paths: FieldPath) -> _Plan:
    if paths is None:
        return ()
    plan = []
    for path in (paths,) if isinstance(paths, str) else paths:
        from_token = path.startswith(_TOKEN_PREFIX)
        if from_token:
            path = path[len(_TOKEN_PREFIX) :]
        plan.append((from_token, tuple(path.split("."))))
    return tuple(plan)


def as_text(value: Any) -> str | None:
    """``value`` as a stripped non-empty string (numbers become strings), else ``None``."""
    if type(value) is str:
        return value.strip() or None
    if value is None or isinstance(value, bool):
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
    return _first_text(_plan(paths), data, token or {})


def _first_text(plan: _Plan, data: Any, token: Mapping[str, Any]) -> str | None:
    for from_token, parts in plan:
        text = as_text(_walk(token if from_token else data, parts))
        if text is not None:
            return text
    return None


def first_flag(data: Any, paths: FieldPath, token: Mapping[str, Any] | None = None) -> bool | None:
    """The first boolean among ``paths`` (see :func:`as_flag`), else ``None``."""
    return _first_flag(_plan(paths), data, token or {})


def _first_flag(plan: _Plan, data: Any, token: Mapping[str, Any]) -> bool | None:
    for from_token, parts in plan:
        flag = as_flag(_walk(token if from_token else data, parts))
        if flag is not None:
            return flag
    return None


class _Plans(NamedTuple):
    """The split paths of each :class:`ProfileFields` field that :meth:`~ProfileFields.extract`
    reads (a flag given as ``True``/``False`` has none)."""

    provider_key: _Plan
    username: _Plan
    first_name: _Plan
    last_name: _Plan
    full_name: _Plan
    email: _Plan
    email_verified: _Plan
    avatar_url: _Plan
    email_valid: _Plan
    avatar_is_placeholder: _Plan


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
    #: Each field's paths split: derived once, when the mapping is made (mappings are declared
    #: per provider, then read on every sign-in).
    _plans: _Plans = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plans = _Plans._make(
            () if isinstance(paths, bool) else _plan(paths)
            for paths in (getattr(self, name) for name in _Plans._fields)
        )
        object.__setattr__(self, "_plans", plans)  # frozen: set once, here

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
        plans = self._plans
        key = _first_text(plans.provider_key, raw, params)
        if key is None:
            return None
        email = _first_text(plans.email, raw, params)
        verified: bool | None = None
        if email is not None:
            if isinstance(self.email_verified, bool):
                verified = self.email_verified
            else:
                verified = _first_flag(plans.email_verified, raw, params)
            if verified and _first_flag(plans.email_valid, raw, params) is False:
                verified = False
        avatar = _first_text(plans.avatar_url, raw, params)
        if _first_flag(plans.avatar_is_placeholder, raw, params) is True:
            avatar = None
        if avatar is not None and self.avatar_url_template is not None:
            avatar = self._avatar_from_template(key, avatar)
        return SocialProfile(
            provider_id=provider_id,
            provider_key=key,
            username=_first_text(plans.username, raw, params),
            first_name=_first_text(plans.first_name, raw, params),
            last_name=_first_text(plans.last_name, raw, params),
            full_name=_first_text(plans.full_name, raw, params),
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
