"""The data of a sign-in: a provider's settings record, the token and the user's profile.

Nothing here knows about Flask.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from ..errors import ConfigurationError, ConfigurationProblem
from ..urls import check_endpoint_url, check_redirect_url

#: The URL checks are pure and the costly part of validating a record: memoized (bounded), so
#: that a record derived with :meth:`OAuth2Settings.replace` (``with_settings``) re-checks only
#: the addresses it changed.
_checked_endpoint_url: Final = functools.lru_cache(maxsize=1024)(check_endpoint_url)
_checked_redirect_url: Final = functools.lru_cache(maxsize=1024)(check_redirect_url)

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})

#: Configuration key (as the specification writes it) -> attribute name.
CONFIG_KEYS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "authorizationURL": "authorization_url",
        "accessTokenURL": "access_token_url",
        "redirectURL": "redirect_url",
        "apiURL": "api_url",
        "clientID": "client_id",
        "clientSecret": "client_secret",
        "scope": "scope",
        "authorizationParams": "authorization_params",
        "accessTokenParams": "access_token_params",
        "customProperties": "custom_properties",
    }
)
REQUIRED_KEYS: Final = ("accessTokenURL", "redirectURL", "clientID", "clientSecret")
_OPTIONAL_STRING_KEYS: Final = ("authorizationURL", "apiURL", "scope")
_MAP_KEYS: Final = ("authorizationParams", "accessTokenParams", "customProperties")
_ENDPOINT_KEYS: Final = ("authorizationURL", "accessTokenURL", "apiURL")
#: Parameters the flow sets itself; configuration may not override them.
RESERVED_PARAMS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "authorizationParams": frozenset(
            {
                "response_type",
                "client_id",
                "redirect_uri",
                "scope",
                "state",
                "code_challenge",
                "code_challenge_method",
                "nonce",
            }
        ),
        "accessTokenParams": frozenset(
            {"grant_type", "code", "redirect_uri", "code_verifier", "client_id", "client_secret"}
        ),
    }
)
_SECRET_WORDS: Final = ("secret", "password", "token", "key", "assertion", "credential")
#: What ``repr`` and the CLI show instead of a secret value.
MASK: Final = "***"

_UNSET: Any = object()


def _type_name(value: object) -> str:
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def _value_problems(values: Mapping[str, Any]) -> list[ConfigurationProblem]:
    """Check the values of a block given by configuration key; missing keys are not checked."""
    problems: list[ConfigurationProblem] = []

    def problem(key: str, message: str) -> None:
        problems.append(ConfigurationProblem(None, key, message))

    for key in REQUIRED_KEYS + _OPTIONAL_STRING_KEYS:
        if key not in values:
            continue
        value = values[key]
        if value is None and key in _OPTIONAL_STRING_KEYS:
            continue
        if not isinstance(value, str):
            hint = " (several scope entries go in one string, separated by a space)"
            problem(
                key, f"must be a string, not {_type_name(value)}{hint if key == 'scope' else ''}"
            )
        elif not value.strip():
            problem(key, "must not be empty")
        elif key in _ENDPOINT_KEYS:
            error = _checked_endpoint_url(value)
            if error:
                problem(key, f"{error}: {_shown_url(value)}")
        elif key == "redirectURL":
            error = _checked_redirect_url(value)
            if error:
                problem(key, f"{error}: {_shown_url(value)}")
        elif key == "clientID" and value != value.strip():
            problem(key, "must not start or end with white space")
    for key in _MAP_KEYS:
        mapping = values.get(key)
        if mapping is None:
            continue
        if not isinstance(mapping, Mapping):
            problem(key, f"must be a map of strings to strings, not {_type_name(mapping)}")
            continue
        reserved = RESERVED_PARAMS.get(key, frozenset())
        for name, item in mapping.items():
            if not isinstance(name, str) or not isinstance(item, str):
                what = (
                    f"entry {name!r}"
                    if isinstance(name, str)
                    else f"a key of type {type(name).__name__}"
                )
                problem(key, f"{what} must map a string to a string, not to {_type_name(item)}")
            elif name in reserved:
                problem(key, f"must not set {name!r}: the flow sets it")
    return problems


def masked(key: str, value: str) -> str:
    """``value``, or :data:`MASK` when ``key`` looks like the name of a secret."""
    return MASK if any(word in key.lower() for word in _SECRET_WORDS) else value


def _shown_url(value: str) -> str:
    """A URL as an error message may show it: no user credentials, query or fragment, which
    can carry secrets."""
    try:
        parts = urlsplit(value)
        netloc = parts.hostname or ""
        if parts.port is not None:
            netloc = f"{netloc}:{parts.port}"
    except ValueError:
        return "(value not shown)"
    shown = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else parts.path
    return repr(shown[:200])


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class OAuth2Settings:
    """The settings record of one OAuth2 provider, as the specification defines it.

    Instances are immutable and validated when created; the three mappings are read-only. Create
    one from a configuration block with :meth:`from_config`, derive a changed copy with
    :meth:`replace`. ``repr`` never shows the client secret.

    :raises ConfigurationError: listing every invalid value.
    """

    access_token_url: str
    redirect_url: str
    client_id: str
    client_secret: str
    authorization_url: str | None = None
    api_url: str | None = None
    scope: str | None = None
    authorization_params: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    access_token_params: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    custom_properties: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    config_keys: ClassVar[Mapping[str, str]] = CONFIG_KEYS

    def __post_init__(self) -> None:
        problems = _value_problems(self._as_config_values())
        if problems:
            raise ConfigurationError(problems)
        for attribute in ("authorization_params", "access_token_params", "custom_properties"):
            value = getattr(self, attribute)
            if value is None:  # e.g. `accessTokenParams: null`: validated as absent, so empty
                object.__setattr__(self, attribute, _EMPTY)
            elif not isinstance(value, MappingProxyType):
                object.__setattr__(self, attribute, MappingProxyType(dict(value)))

    def _as_config_values(self) -> dict[str, Any]:
        return {key: getattr(self, attribute) for key, attribute in CONFIG_KEYS.items()}

    @classmethod
    def from_config(
        cls, block: Mapping[str, Any], *, provider: str | None = None
    ) -> OAuth2Settings:
        """Validate a configuration block (the specification's camelCase keys) and build the
        record.

        Empty optional strings count as absent. Every problem of the block is reported at once.

        :param block: The provider's block.
        :param provider: The provider's name, used in error messages.
        :raises ConfigurationError: listing every problem, each naming the provider and the key.
        """
        if not isinstance(block, Mapping):
            raise ConfigurationError(
                [
                    ConfigurationProblem(
                        provider, None, f"must be a map of settings, not {_type_name(block)}"
                    )
                ]
            )
        problems: list[ConfigurationProblem] = []
        values: dict[str, Any] = {}
        for key, value in block.items():
            if key in CONFIG_KEYS:
                if key in _OPTIONAL_STRING_KEYS and (value is None or value == ""):
                    continue
                values[key] = value
            else:
                problems.append(ConfigurationProblem(provider, str(key), _unknown_key_message(key)))
        for key in REQUIRED_KEYS:
            if key not in values:
                problems.append(ConfigurationProblem(provider, key, "is required"))
        if problems:
            problems.extend(
                dataclasses.replace(item, provider=provider) for item in _value_problems(values)
            )
            raise ConfigurationError(problems)
        try:
            return cls(**{CONFIG_KEYS[key]: value for key, value in values.items()})
        except ConfigurationError as error:
            raise ConfigurationError(
                [dataclasses.replace(item, provider=provider) for item in error.problems]
            ) from None

    def to_config(self) -> dict[str, Any]:
        """The record as a configuration block; :meth:`from_config` reads it back unchanged.

        Absent optional values and empty maps are left out. This includes the client secret:
        treat the result as secret.
        """
        block: dict[str, Any] = {}
        for key, value in self._as_config_values().items():
            if value is None or (isinstance(value, Mapping) and not value):
                continue
            block[key] = dict(value) if isinstance(value, Mapping) else value
        return block

    def replace(
        self,
        *,
        authorization_url: str | None = _UNSET,
        access_token_url: str = _UNSET,
        redirect_url: str = _UNSET,
        api_url: str | None = _UNSET,
        client_id: str = _UNSET,
        client_secret: str = _UNSET,
        scope: str | None = _UNSET,
        authorization_params: Mapping[str, str] = _UNSET,
        access_token_params: Mapping[str, str] = _UNSET,
        custom_properties: Mapping[str, str] = _UNSET,
    ) -> OAuth2Settings:
        """A copy with the given fields changed, validated like configuration.

        :raises ConfigurationError: when a changed value is invalid.
        """
        changes = {name: value for name, value in locals().items() if value is not _UNSET}
        del changes["self"]
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        parts = []
        for field_ in dataclasses.fields(self):
            value = getattr(self, field_.name)
            if field_.name == "client_secret":
                parts.append(f"client_secret={MASK!r}")
            elif isinstance(value, Mapping):
                shown = {key: masked(key, item) for key, item in value.items()}
                parts.append(f"{field_.name}={shown!r}")
            else:
                parts.append(f"{field_.name}={value!r}")
        return f"OAuth2Settings({', '.join(parts)})"

    __str__ = __repr__

    def __hash__(self) -> int:
        return hash(
            tuple(
                tuple(sorted(value.items())) if isinstance(value, Mapping) else value
                for value in self._as_config_values().values()
            )
        )


def closest_name(word: str, known: Iterable[str]) -> str | None:
    """The name of ``known`` that ``word`` most likely misspells, for a "did you mean": the same
    name but for case and underscores (``client_id`` for ``clientID``), else the closest one
    :func:`difflib.get_close_matches` finds; ``None`` when none is close."""
    names = list(known)
    by_case = {name.replace("_", "").lower(): name for name in names}
    guess = by_case.get(word.replace("_", "").lower())
    if guess is None:
        close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
        guess = close[0] if close else None
    return guess


def _unknown_key_message(key: object) -> str:
    if not isinstance(key, str):
        return f"keys must be strings, not {_type_name(key)}"
    known = list(CONFIG_KEYS)
    guess = closest_name(key, known)
    hint = f"; did you mean {guess!r}?" if guess else f"; known keys: {', '.join(known)}"
    return f"is not a known key{hint}"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class OAuth2Info:
    """The result of a successful code exchange: the provider's token response.

    ``repr`` shows which fields are present, never a token.

    :param access_token: The access token.
    :param token_type: The token type, e.g. ``"Bearer"``.
    :param expires_in: Seconds until the access token expires, when the provider says.
    :param refresh_token: The refresh token, when the provider issued one.
    :param params: Every other field of the token response (e.g. ``id_token``, ``scope``).
    :param id_token_claims: The claims of the OpenID Connect ID token (``params["id_token"]``)
        once verified (signature, issuer, audience, expiry, nonce); ``None`` when no ID token
        was verified. ``repr`` shows the claim names only.
    :param expires_at: When the access token expires, in seconds since the epoch; set by the
        token stores (from ``expires_in`` when the token is saved), ``None`` when unknown.
    :param dpop_key: The private key the tokens are bound to (DPoP, RFC 9449), as a JWK in
        JSON, when the sign-in used DPoP; kept encrypted by the token stores and never shown.
    """

    access_token: str
    token_type: str | None = None
    expires_in: int | None = None
    refresh_token: str | None = None
    params: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    id_token_claims: Mapping[str, Any] | None = None
    expires_at: float | None = None
    dpop_key: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.params, MappingProxyType):
            object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        claims = self.id_token_claims
        if claims is not None and not isinstance(claims, MappingProxyType):
            object.__setattr__(self, "id_token_claims", MappingProxyType(dict(claims)))

    def __repr__(self) -> str:
        refresh = MASK if self.refresh_token else None
        return (
            f"OAuth2Info(access_token={MASK!r}, token_type={self.token_type!r}, "
            f"expires_in={self.expires_in!r}, refresh_token={refresh!r}, "
            + ("" if self.expires_at is None else f"expires_at={self.expires_at!r}, ")
            + f"params=<{', '.join(sorted(self.params))}>"
            + (
                ""
                if self.id_token_claims is None
                else f", id_token_claims=<{', '.join(sorted(self.id_token_claims))}>"
            )
            + ("" if self.dpop_key is None else f", dpop_key={MASK!r}")
            + ")"
        )

    __str__ = __repr__


@dataclass(frozen=True, slots=True, kw_only=True)
class SocialProfile:
    """A user's profile at a provider, normalized.

    Identify users by ``(provider_id, provider_key)``, never by e-mail: ``provider_key`` is the
    provider's immutable user id. Never link accounts by an e-mail address that is not
    verified (``email_verified`` is not ``True``): anybody can type someone else's address at
    a provider that does not check it.

    :param provider_id: The provider's name, e.g. ``"github"``.
    :param provider_key: The user's immutable id at the provider, as a string.
    :param username: The provider's handle (e.g. a GitHub login), or ``None``.
    :param full_name: The provider's display name, else first and last name joined; never the
        username.
    :param email_verified: ``True``/``False`` as the provider says, ``None`` when it says
        nothing (or gives no address).
    :param avatar_url: An ``http(s)`` address or ``None``: any other value (``javascript:``,
        ``data:``, a relative path) is dropped.
    :param raw: The provider's JSON, as it came.
    """

    provider_id: str
    provider_key: str
    username: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    full_name: str | None = None
    email: str | None = None
    email_verified: bool | None = None
    avatar_url: str | None = None
    raw: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False, compare=False)

    _SESSION_FIELDS: ClassVar = (
        "provider_id",
        "provider_key",
        "username",
        "first_name",
        "last_name",
        "full_name",
        "email",
        "email_verified",
        "avatar_url",
    )

    def __post_init__(self) -> None:
        if self.full_name is None and (self.first_name or self.last_name):
            joined = " ".join(part for part in (self.first_name, self.last_name) if part)
            object.__setattr__(self, "full_name", joined)
        if self.avatar_url is not None and not _is_web_url(self.avatar_url):
            object.__setattr__(self, "avatar_url", None)
        if self.email is None or not isinstance(self.email_verified, bool):
            object.__setattr__(self, "email_verified", None)

    def to_dict(self) -> dict[str, str | bool | None]:
        """The normalized fields (not ``raw``), e.g. to keep in the session."""
        return {name: getattr(self, name) for name in self._SESSION_FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SocialProfile:
        """Rebuild a profile from :meth:`to_dict`'s output."""
        values: dict[str, Any] = {name: data.get(name) for name in cls._SESSION_FIELDS}
        return cls(**values)


#: ``http(s)://host...`` with no whitespace or control character anywhere: what a browser
#: can only ever load as a picture (never ``javascript:``, ``data:``, ``//host`` or a path).
_WEB_URL: Final = re.compile(r"https?://[^\x00-\x20\x7f/?#\\@]+(?:[/?#][^\x00-\x20\x7f]*)?", re.I)


def _is_web_url(value: object) -> bool:
    return isinstance(value, str) and _WEB_URL.fullmatch(value) is not None
