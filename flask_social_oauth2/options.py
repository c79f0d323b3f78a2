"""The extension's ``SOCIAL_OAUTH2_*`` settings: their defaults, how they are checked, and the
typed record ``init_app`` reads them into once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from .errors import ConfigurationError, ConfigurationProblem
from .tokens.cipher import token_key_problems
from .tokens.setting import token_store_from_setting

if TYPE_CHECKING:
    from .tokens.store import TokenStore

DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "SOCIAL_OAUTH2_PROVIDERS": {},
        "SOCIAL_OAUTH2_PROVIDERS_FILE": None,
        "SOCIAL_OAUTH2_PROVIDER_CLASSES": {},
        "SOCIAL_OAUTH2_URL_RULE": "/authenticate/<provider>",
        "SOCIAL_OAUTH2_TIMEOUT": 10,
        "SOCIAL_OAUTH2_STATE_TTL": 600,
        "SOCIAL_OAUTH2_MAX_RESPONSE_BYTES": 1024 * 1024,
        "SOCIAL_OAUTH2_STATE_COOKIE": None,
        "SOCIAL_OAUTH2_STATE_COOKIE_PATH": "/",
        "SOCIAL_OAUTH2_SESSION_KEY": "social_profile",
        "SOCIAL_OAUTH2_CHECK_REDIRECT_URLS": True,
        "SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL": 30,
        "SOCIAL_OAUTH2_TOKEN_STORE": "session",
        "SOCIAL_OAUTH2_TOKEN_KEYS": None,
        "SOCIAL_OAUTH2_REFRESH_LEEWAY": 30,
        "SOCIAL_OAUTH2_CROSS_SITE_START": "confirm",
        "SOCIAL_OAUTH2_SIGN_IN_PAGE": None,
        "SOCIAL_OAUTH2_PROVIDER_CACHE_TTL": 60,
        "SOCIAL_OAUTH2_PROVIDER_CACHE_SIZE": 1024,
        "SOCIAL_OAUTH2_SESSION_CHECK_SECONDS": 10,
    }
)


@dataclass(frozen=True, slots=True)
class Options:
    """The extension's settings, checked and typed (each field names its config key)."""

    #: ``SOCIAL_OAUTH2_URL_RULE``.
    rule: str
    #: ``SOCIAL_OAUTH2_TIMEOUT``, seconds.
    timeout: float
    #: ``SOCIAL_OAUTH2_STATE_TTL``, seconds.
    state_ttl: int
    #: ``SOCIAL_OAUTH2_MAX_RESPONSE_BYTES``.
    max_bytes: int
    #: ``SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL``, seconds.
    discovery_failure_ttl: float
    #: ``SOCIAL_OAUTH2_TOKEN_STORE``, made; ``None`` for ``"none"``.
    token_store: TokenStore | None
    #: ``SOCIAL_OAUTH2_CROSS_SITE_START == "confirm"``.
    confirm_cross_site_starts: bool
    #: ``SOCIAL_OAUTH2_STATE_COOKIE`` (``None``: a name derived from the app).
    state_cookie: str | None
    #: ``SOCIAL_OAUTH2_STATE_COOKIE_PATH``.
    state_cookie_path: str
    #: ``SOCIAL_OAUTH2_SESSION_KEY``.
    session_key: str
    #: ``SOCIAL_OAUTH2_CHECK_REDIRECT_URLS``.
    check_redirect_urls: bool
    #: ``SOCIAL_OAUTH2_PROVIDER_CLASSES``.
    provider_classes: Mapping[str, Any]
    #: ``SOCIAL_OAUTH2_SIGN_IN_PAGE``: the path of the ready sign-in page, ``None`` for none.
    sign_in_page: str | None = None
    #: ``SOCIAL_OAUTH2_PROVIDER_CACHE_TTL``, seconds a provider loader's answer is kept.
    provider_cache_ttl: float = 60.0
    #: ``SOCIAL_OAUTH2_PROVIDER_CACHE_SIZE``, how many loaded names are kept.
    provider_cache_size: int = 1024

    #: ``SOCIAL_OAUTH2_REFRESH_LEEWAY``, seconds.
    refresh_leeway: float = 30.0

    #: ``SOCIAL_OAUTH2_SESSION_CHECK_SECONDS``: how often a request checks whether the
    #: provider ended the browser's session (``0``: every request).
    session_check_seconds: float = 10.0


def read_options(config: Mapping[str, Any]) -> Options:
    """The checked values of the settings the extension reads once in ``init_app``.

    :raises ConfigurationError: listing every setting that is wrong.
    """
    problems = []

    def number(key: str, kind: type, minimum: float) -> Any:
        value = config[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not minimum <= value < 2**53  # also refuses NaN, infinity and 10**400
        ):
            what = "a whole number" if kind is int else "a number"
            problems.append(
                ConfigurationProblem(None, key, f"must be {what} >= {minimum}, not {value!r}")
            )
            return None
        return kind(value)

    options = {
        "timeout": number("SOCIAL_OAUTH2_TIMEOUT", float, 0.1),
        "state_ttl": number("SOCIAL_OAUTH2_STATE_TTL", int, 10),
        "max_bytes": number("SOCIAL_OAUTH2_MAX_RESPONSE_BYTES", int, 1024),
        "discovery_failure_ttl": number("SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL", float, 0),
        "session_check_seconds": number("SOCIAL_OAUTH2_SESSION_CHECK_SECONDS", float, 0),
        "rule": config["SOCIAL_OAUTH2_URL_RULE"],
        "provider_cache_ttl": number("SOCIAL_OAUTH2_PROVIDER_CACHE_TTL", float, 0),
        "provider_cache_size": number("SOCIAL_OAUTH2_PROVIDER_CACHE_SIZE", int, 1),
        "refresh_leeway": number("SOCIAL_OAUTH2_REFRESH_LEEWAY", float, 0),
    }
    try:
        options["token_store"] = token_store_from_setting(config["SOCIAL_OAUTH2_TOKEN_STORE"])
    except ConfigurationError as error:
        problems.extend(error.problems)
    if config["SOCIAL_OAUTH2_TOKEN_KEYS"] is not None:
        problems.extend(token_key_problems(config))
    rule = options["rule"]
    if not isinstance(rule, str) or not rule.startswith("/") or "<provider>" not in rule:
        problems.append(
            ConfigurationProblem(
                None, "SOCIAL_OAUTH2_URL_RULE", "must be a path containing '<provider>'"
            )
        )
    cross_site = config["SOCIAL_OAUTH2_CROSS_SITE_START"]
    if cross_site not in ("confirm", "allow"):
        problems.append(
            ConfigurationProblem(
                None,
                "SOCIAL_OAUTH2_CROSS_SITE_START",
                f"must be 'confirm' or 'allow', not {cross_site!r}",
            )
        )
    options["confirm_cross_site_starts"] = cross_site == "confirm"
    cookie = config["SOCIAL_OAUTH2_STATE_COOKIE"]
    if cookie is not None and (not isinstance(cookie, str) or not cookie):
        problems.append(
            ConfigurationProblem(
                None, "SOCIAL_OAUTH2_STATE_COOKIE", "must be a non-empty string (or None)"
            )
        )
    for key in (
        "SOCIAL_OAUTH2_STATE_COOKIE_PATH",
        "SOCIAL_OAUTH2_SESSION_KEY",
    ):
        if not isinstance(config[key], str) or not config[key]:
            problems.append(ConfigurationProblem(None, key, "must be a non-empty string"))
    if not isinstance(config["SOCIAL_OAUTH2_PROVIDER_CLASSES"], Mapping):
        problems.append(
            ConfigurationProblem(
                None, "SOCIAL_OAUTH2_PROVIDER_CLASSES", "must map provider names to classes"
            )
        )
    sign_in_page = config["SOCIAL_OAUTH2_SIGN_IN_PAGE"]
    if sign_in_page is not None and (
        not isinstance(sign_in_page, str)
        or not sign_in_page.startswith("/")
        or "<" in sign_in_page
        or any(not "\x21" <= c <= "\x7e" for c in sign_in_page)
    ):
        problems.append(
            ConfigurationProblem(
                None,
                "SOCIAL_OAUTH2_SIGN_IN_PAGE",
                f"must be a path such as '/sign-in' (or None for no page), not {sign_in_page!r}",
            )
        )
    if problems:
        raise ConfigurationError(problems)
    return Options(
        rule=rule,
        timeout=options["timeout"],
        state_ttl=options["state_ttl"],
        max_bytes=options["max_bytes"],
        discovery_failure_ttl=options["discovery_failure_ttl"],
        token_store=options["token_store"],
        confirm_cross_site_starts=options["confirm_cross_site_starts"],
        state_cookie=cookie,
        state_cookie_path=config["SOCIAL_OAUTH2_STATE_COOKIE_PATH"],
        session_key=config["SOCIAL_OAUTH2_SESSION_KEY"],
        check_redirect_urls=bool(config["SOCIAL_OAUTH2_CHECK_REDIRECT_URLS"]),
        provider_classes=config["SOCIAL_OAUTH2_PROVIDER_CLASSES"],
        sign_in_page=sign_in_page,
        provider_cache_ttl=options["provider_cache_ttl"],
        provider_cache_size=options["provider_cache_size"],
        refresh_leeway=options["refresh_leeway"],
        session_check_seconds=options["session_check_seconds"],
    )
