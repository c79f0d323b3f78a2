"""The ``customProperties`` keys every OAuth 2.0 provider reads, parsed once into a typed record.

:func:`read_provider_options` reads a block's ``customProperties`` into a frozen
:class:`ProviderOptions` and lists every problem of their values at once (the messages
``init_app`` shows). A provider builds its record when it is made (``init_app``,
``with_settings``) and keeps it; the flow below reads its attributes, never the strings. Keys one
provider alone reads are parsed by that provider (its hooks). Keys nobody reads are kept in
``OAuth2Settings.custom_properties`` as they are, and ignored.

A new key is one field of :class:`ProviderOptions` and one line of :func:`read_provider_options`
(a :class:`PropertyReader` method says how its value is read and checked).

The checks that need more than the block (the provider's issuer, a private key that must load,
a response mode the provider imposes) stay with the code that knows it; they read this record.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar
from urllib.parse import urlsplit

from ..errors import ConfigurationProblem
from ..urls import check_endpoint_url
from .settings import OAuth2Settings

__all__ = [
    "ANY_TENANT",
    "CLIENT_AUTH_METHODS",
    "PAR_MODES",
    "RESPONSE_MODES",
    "SAFE_ALGORITHMS",
    "PropertyReader",
    "ProviderOptions",
    "issuer_from_discovery_url",
    "issuer_problem",
    "read_provider_options",
]

#: Every ``tokenEndpointAuthMethod`` a block may name.
CLIENT_AUTH_METHODS: Final = (
    "client_secret_post",
    "client_secret_basic",
    "private_key_jwt",
    "client_secret_jwt",
    "none",
)
#: Every ``pushedAuthorization`` mode.
PAR_MODES: Final = ("auto", "required", "off")
#: Every ``responseMode``: ``query`` (the code flow's default: a ``GET`` with the answer in the
#: query) and ``form_post`` (a form ``POST``).
RESPONSE_MODES: Final = ("query", "form_post")
#: The algorithms an ID token may be signed with (asymmetric ones only).
SAFE_ALGORITHMS: Final = frozenset(
    {
        "RS256",
        "RS384",
        "RS512",
        "PS256",
        "PS384",
        "PS512",
        "ES256",
        "ES384",
        "ES512",
        "EdDSA",
        "Ed25519",
    }
)
#: Clock skew allowed on an ID token's times unless ``idTokenLeeway`` says otherwise, and the
#: most it may say.
DEFAULT_ID_TOKEN_LEEWAY: Final = 60
MAX_ID_TOKEN_LEEWAY: Final = 300
#: Where OpenID Connect Discovery and RFC 8414 put a server's metadata.
WELL_KNOWN_PATH: Final = "/.well-known/openid-configuration"
RFC8414_PATH: Final = "/.well-known/oauth-authorization-server"

#: The ``allowedTenants`` value that lets any tenant sign in.
ANY_TENANT: Final = "*"
# A tenant id as the issuer template takes it (the rule of oauth.metadata's placeholder).
_TENANT_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]{0,99}")

_Own = TypeVar("_Own")

# Only ASCII digits: str.isdigit() also accepts "²", which int() refuses.
_WHOLE_SECONDS: Final = re.compile(r"[0-9]{1,3}")


@dataclass(frozen=True, slots=True)
class ProviderOptions:
    """A block's ``customProperties`` as the flow reads them: checked and typed. Each field
    names its key; a key the block leaves out has the field's default."""

    #: ``tokenEndpointAuthMethod``; ``None``: the provider's default.
    token_auth_method: str | None = None
    #: ``keyID``: the ``kid`` of a ``private_key_jwt`` key.
    key_id: str | None = None
    #: ``pushedAuthorization``: ``auto``, ``required`` or ``off``.
    pushed_authorization: str = "auto"
    #: ``pushedAuthorizationURL``.
    pushed_authorization_url: str | None = None
    #: ``dpop``: whether tokens are bound to a key of the sign-in (RFC 9449).
    dpop: bool = False
    #: The OpenID Connect issuer the block names: ``issuer``, else the one ``discoveryURL``
    #: implies.
    issuer: str | None = None
    #: ``discoveryURL``.
    discovery_url: str | None = None
    #: ``idTokenAlgorithms`` (space separated), within the safe (asymmetric) algorithms.
    id_token_algorithms: frozenset[str] = SAFE_ALGORITHMS
    #: ``idTokenLeeway``, seconds.
    id_token_leeway: int = DEFAULT_ID_TOKEN_LEEWAY
    #: ``revocationURL``.
    revocation_url: str | None = None
    #: ``apiBaseURL``: the base of relative API URLs after sign-in.
    api_base_url: str | None = None
    #: ``endSessionURL``: the OpenID Connect RP-Initiated Logout endpoint.
    end_session_url: str | None = None
    #: ``responseMode``: ``query``, ``form_post`` or ``None`` (not named).
    response_mode: str | None = None
    #: ``title``: the provider's name as people know it.
    title: str | None = None
    #: ``allowLoopback`` is ``"true"`` (development against servers on this machine).
    allow_loopback: bool = False
    #: ``allowedTenants``: the tenant ids (lower case: Entra's are GUIDs) a multi-tenant
    #: issuer's ID tokens may carry as ``tid``; ``{"*"}`` for any; ``None``: no list.
    allowed_tenants: frozenset[str] | None = None
    #: ``idTokenSignIn``: the block takes ID tokens the browser posts (One Tap, FedCM).
    id_token_sign_in: bool = False
    #: ``hostedDomains``: the ``hd`` claims (lower case) a posted ID token may carry; empty:
    #: any account.
    hosted_domains: frozenset[str] = frozenset()
    #: ``backchannelLogout``: the provider POSTs logout tokens to ``<url rule>/backchannel-logout``.
    backchannel_logout: bool = False
    #: ``frontchannelLogout``: the provider loads ``<url rule>/frontchannel-logout`` in a frame.
    frontchannel_logout: bool = False
    #: The keys only this provider reads, as its hooks parsed them (their
    #: ``read_options``); ``None`` for most providers.
    own: object = None

    def own_as(self, kind: type[_Own]) -> _Own:
        """:attr:`own`, which the provider's hooks made a ``kind``.

        :raises TypeError: when it is not one (hooks and record do not match).
        """
        if not isinstance(self.own, kind):
            raise TypeError(f"customProperties were parsed into {type(self.own).__name__}")
        return self.own


class PropertyReader:
    """Reads the values of one block's ``customProperties``, noting each problem (the key is
    ``customProperties.<key>``; the provider name is filled in by the caller).

    :param settings: The block (a check may depend on another key of it, e.g. ``clientID``).
    """

    __slots__ = ("problems", "properties", "settings")

    def __init__(self, settings: OAuth2Settings) -> None:
        self.settings = settings
        self.properties = settings.custom_properties
        self.problems: list[ConfigurationProblem] = []

    def problem(self, key: str, message: str) -> None:
        """Note that ``key``'s value is wrong."""
        self.problems.append(ConfigurationProblem(None, f"customProperties.{key}", message))

    def text(self, key: str) -> str | None:
        """The value as it is, or ``None``."""
        return self.properties.get(key)

    def url(self, key: str) -> str | None:
        """An endpoint: https (http only on loopback)."""
        url = self.properties.get(key)
        error = None if url is None else check_endpoint_url(url)
        if error is not None:
            self.problem(key, error)
        return url

    def choice(self, key: str, choices: tuple[str, ...]) -> str | None:
        """One of ``choices``, or ``None`` when left out (or wrong)."""
        value = self.properties.get(key)
        if value is None or value in choices:
            return value
        self.problem(key, f"must be one of {', '.join(choices)}")
        return None

    def flag(self, key: str) -> bool:
        """``"true"`` or ``"false"`` (the default)."""
        value = self.properties.get(key, "false")
        if value not in ("true", "false"):
            self.problem(key, "must be true or false")
        return value == "true"

    def words(self, key: str) -> tuple[str, ...]:
        """A space-separated list; empty when left out."""
        return tuple((self.properties.get(key) or "").split())

    def is_true(self, key: str) -> bool:
        """Whether the value is ``"true"``; anything else is off (a key never checked)."""
        return self.properties.get(key) == "true"


def read_provider_options(
    settings: OAuth2Settings, own: Callable[[PropertyReader], object] | None = None
) -> tuple[ProviderOptions, list[ConfigurationProblem]]:
    """``settings``' ``customProperties`` as a :class:`ProviderOptions`, and every problem of
    their values (none when the record is usable).

    :param own: Reads the keys only this provider reads into its own record
        (:attr:`ProviderOptions.own`), noting their problems with the reader.
    """
    read = PropertyReader(settings)
    options = ProviderOptions(
        token_auth_method=read.choice("tokenEndpointAuthMethod", CLIENT_AUTH_METHODS),
        key_id=read.text("keyID"),
        pushed_authorization=read.choice("pushedAuthorization", PAR_MODES) or "auto",
        pushed_authorization_url=read.url("pushedAuthorizationURL"),
        dpop=read.flag("dpop"),
        issuer=_issuer(read),
        discovery_url=read.text("discoveryURL"),
        revocation_url=read.url("revocationURL"),
        api_base_url=read.url("apiBaseURL"),
        end_session_url=read.url("endSessionURL"),
        id_token_algorithms=_id_token_algorithms(read),
        id_token_leeway=_id_token_leeway(read),
        response_mode=read.choice("responseMode", RESPONSE_MODES),
        title=read.text("title"),
        allow_loopback=read.is_true("allowLoopback"),
        allowed_tenants=_allowed_tenants(read),
        id_token_sign_in=read.flag("idTokenSignIn"),
        hosted_domains=_hosted_domains(read),
        backchannel_logout=read.flag("backchannelLogout"),
        frontchannel_logout=read.flag("frontchannelLogout"),
        own=None if own is None else own(read),
    )
    return options, read.problems


def _allowed_tenants(read: PropertyReader) -> frozenset[str] | None:
    value = read.text("allowedTenants")
    if value is None:
        return None
    items = value.split()
    if not items:
        read.problem("allowedTenants", "must list tenant ids separated by spaces, or be '*'")
    elif ANY_TENANT in items and len(items) > 1:
        read.problem("allowedTenants", "is '*' (any tenant) or a list of tenant ids, not both")
    elif ANY_TENANT not in items:
        bad = [item for item in items if _TENANT_ID.fullmatch(item) is None]
        if bad:
            read.problem(
                "allowedTenants",
                "must list tenant ids (letters, digits, '.' and '-'), separated by spaces;"
                f" not {', '.join(repr(item[:40]) for item in bad[:3])}",
            )
    return frozenset(item.lower() for item in items)


def _hosted_domains(read: PropertyReader) -> frozenset[str]:
    value = read.text("hostedDomains")
    if value is not None and not value.split():
        read.problem("hostedDomains", "must name at least one domain")
    return frozenset((value or "").lower().split())


def issuer_from_discovery_url(url: str) -> str | None:
    """The issuer a discovery address implies: the part before
    ``/.well-known/openid-configuration`` (OpenID Connect Discovery), or the host plus the part
    after ``/.well-known/oauth-authorization-server`` (RFC 8414); else ``None``."""
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        return None
    origin = f"{parts.scheme}://{parts.netloc}"
    if parts.path.endswith(WELL_KNOWN_PATH):
        return origin + parts.path[: -len(WELL_KNOWN_PATH)]
    if parts.path == RFC8414_PATH or parts.path.startswith(RFC8414_PATH + "/"):
        return origin + parts.path[len(RFC8414_PATH) :]
    return None


def issuer_problem(issuer: str) -> str | None:
    """What is wrong with ``issuer`` as an issuer identifier (https, or http on a loopback
    host; no query or fragment), as a sentence; ``None`` when it is acceptable."""
    error = check_endpoint_url(issuer)
    if error is None and (urlsplit(issuer).query or "?" in issuer):
        error = "must not contain a query (OpenID Connect Discovery 2)"
    if error is None and "#" in issuer:
        error = "must not contain a fragment (OpenID Connect Discovery 2)"
    return error


def _issuer(read: PropertyReader) -> str | None:
    """``issuer`` (absolute https, no query), else the issuer ``discoveryURL`` implies (which
    must then end in a well-known path)."""
    issuer = read.text("issuer")
    if issuer is not None:
        error = issuer_problem(issuer)
        if error:
            read.problem("issuer", error)
    discovery = read.text("discoveryURL")
    implied = None if discovery is None else issuer_from_discovery_url(discovery)
    if discovery is not None:
        error = check_endpoint_url(discovery)
        if error is None and issuer is None and implied is None:
            error = (
                f"does not end in {WELL_KNOWN_PATH}, so the issuer cannot be derived from it:"
                " set customProperties.issuer too"
            )
        if error:
            read.problem("discoveryURL", error)
    if issuer:
        return issuer
    return implied if discovery else None


def _id_token_algorithms(read: PropertyReader) -> frozenset[str]:
    algorithms = read.text("idTokenAlgorithms")
    if algorithms is None:
        return SAFE_ALGORITHMS
    named = set(algorithms.split())
    unsafe = sorted(named - SAFE_ALGORITHMS)
    if unsafe or not named:
        read.problem(
            "idTokenAlgorithms",
            f"must list asymmetric algorithms among {', '.join(sorted(SAFE_ALGORITHMS))}"
            + (f"; not {', '.join(repr(name) for name in unsafe)}" if unsafe else ""),
        )
    return SAFE_ALGORITHMS & named if named else SAFE_ALGORITHMS


def _id_token_leeway(read: PropertyReader) -> int:
    value = read.text("idTokenLeeway")
    if value is None:
        return DEFAULT_ID_TOKEN_LEEWAY
    if not _WHOLE_SECONDS.fullmatch(value) or int(value) > MAX_ID_TOKEN_LEEWAY:
        read.problem(
            "idTokenLeeway",
            f"must be a whole number of seconds from 0 to {MAX_ID_TOKEN_LEEWAY} (ASCII digits)",
        )
        return DEFAULT_ID_TOKEN_LEEWAY
    return int(value)
