"""What is known about a built-in provider, written once as data.

A :class:`ProviderFacts` record holds everything about one provider: its endpoints, default
scope, client authentication, profile request and mapping, API base, revocation endpoint, named
quirks and the paragraph of its documentation. :class:`~.base.BuiltinProvider` reads it at run
time; ``flask social init`` and docs/providers.md are generated from it
(:mod:`flask_social_oauth2.providers.docs`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from ..config.profile_fields import OPENID_FIELDS, ProfileFields
from ..config.provider_options import PropertyReader
from ..urls import check_endpoint_url
from .client import TokenAuthMethod

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


class Quirk(enum.Enum):
    """A named way in which a provider departs from plain OAuth 2.0 + a bearer GET.

    The value is the phrase docs/providers.md shows for it.
    """

    #: Every API call (and the token request) sends a descriptive ``User-Agent``:
    #: ``customProperties.userAgent``, else ``web:<clientID>:<version> (flask-social-oauth2)``.
    DESCRIPTIVE_USER_AGENT = "descriptive User-Agent"
    #: Every API call names the application in a ``Client-Id`` header.
    CLIENT_ID_HEADER = "`Client-Id` header"
    #: The API answers failures with HTTP 200 and ``{"ok": false, "error": "..."}``.
    OK_FALSE_IS_ERROR = '`{"ok": false}` answers refused'
    #: The API answers failures with HTTP 200 and an ``error`` object (``error.error_code``).
    ERROR_OBJECT_IS_ERROR = "`error` objects in a 200 answer refused"
    #: The token goes to the profile address as a form field of a ``POST``, not in a header.
    TOKEN_IN_FORM_BODY = "token in a `POST` form body"
    #: The token endpoint answers errors with HTTP 200 and an ``error`` field (refused by the
    #: core's token parsing; stated for the docs).
    ERROR_IN_200_TOKEN_ANSWER = "`error` in a 200 token answer refused"
    #: The profile address ends with the access token itself (HubSpot's token-information
    #: endpoint): the token goes to the provider's own host in the path, never elsewhere.
    TOKEN_IN_PROFILE_PATH = "token in the profile path"
    #: The client id is also sent as ``client_key`` (authorization, token and refresh requests).
    CLIENT_KEY = "`client_key` parameter"
    #: The token request (and a refresh) is sent as a JSON body instead of a form.
    JSON_TOKEN_REQUEST = "JSON token request"
    #: The token answer may wrap the token in ``{"data": [{...}]}``.
    TOKEN_ANSWER_IN_DATA_LIST = 'token answer in `{"data": [...]}` read'
    #: Every API answer carries ``error.code``; anything but ``"ok"`` is a failure.
    ERROR_CODE_NOT_OK_IS_ERROR = '`error.code` other than `"ok"` refused'


@dataclass(frozen=True, slots=True)
class FactsOptions:
    """The ``customProperties`` a built-in provider's facts name, parsed once (see
    :meth:`ProviderFacts.read_options`)."""

    #: ``userAgent`` (:attr:`Quirk.DESCRIPTIVE_USER_AGENT` providers).
    user_agent: str | None = None
    #: ``emailsURL`` (providers with an :class:`EmailList`).
    emails_url: str | None = None
    #: ``accountsServers``, split (providers with a :class:`CallbackTokenServer`).
    accounts_servers: tuple[str, ...] = ()
    #: The profile request's parameters the block sets, by ``customProperties`` key
    #: (:attr:`Param.property`).
    profile_params: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter of the profile request: ``customProperties[property]`` when the block sets
    it, else ``default``."""

    name: str
    default: str
    property: str | None = None

    def value(self, options: FactsOptions) -> str:
        """The value to send, given the block's parsed ``options``."""
        if self.property is None:
            return self.default
        return options.profile_params.get(self.property, self.default)


#: A header value: Latin-1 without control characters (C0, DEL, C1).
_HEADER_LINE: Final = re.compile(r"[\x20-\x7e\xa0-\xff]+")


@dataclass(frozen=True, slots=True)
class PropertyRule:
    """What a ``customProperties`` entry a provider reads must look like.

    ``kind``: ``"choice"`` (one of ``values``), ``"pattern"`` (matches ``values[0]``, e.g.
    ``values[1]``), ``"url"`` (an API address: the access token is sent there, so https, plain
    http on loopback only), ``"urls"`` (several, separated by spaces) or ``"line"`` (a
    non-empty line of Latin-1 characters without control characters: it goes into an HTTP
    header).
    """

    key: str
    kind: Literal["choice", "pattern", "url", "urls", "line"]
    values: tuple[str, ...] = ()

    def problem(self, value: str) -> str | None:
        """What is wrong with ``value``, or ``None``."""
        if self.kind == "choice":
            if value in self.values:
                return None
            return "must be " + " or ".join(repr(option) for option in self.values)
        if self.kind == "pattern":
            if re.fullmatch(self.values[0], value):
                return None
            return f"must be a value such as {self.values[1]!r}"
        if self.kind == "url":
            return check_endpoint_url(value)
        if self.kind == "urls":
            urls = value.split()
            problems = [check_endpoint_url(url) for url in urls]
            found = next((problem for problem in problems if problem is not None), None)
            return found if urls else "must list one or more addresses, separated by spaces"
        if value.strip() and _HEADER_LINE.fullmatch(value):
            return None
        return (
            "must be a non-empty line of Latin-1 characters without control characters"
            " (it is sent as an HTTP header)"
        )


@dataclass(frozen=True, slots=True)
class EmailList:
    """A second call that lists the user's addresses, made when the profile has none.

    The address is the profile address plus ``/emails`` (``customProperties.emailsURL``
    overrides it). The address taken is the entry marked primary *and* verified, so it is
    always ``email_verified=True``; an unverified address is never taken.
    """

    #: Dotted path of the list in the answer (``""``: the answer is the list).
    entries: str
    address: str
    primary: str
    verified: str


@dataclass(frozen=True, slots=True)
class CallbackTokenServer:
    """A provider whose callback names the server that holds the user (Zoho's data centres):
    the token request goes to ``<server><token_path>`` and, without ``apiURL``, the profile
    request to ``<server><profile_path>``.

    The server must be one of ``servers``, the origin of the block's ``accessTokenURL``, or one
    listed in ``customProperties.accountsServers`` (space separated); any other is refused with
    400 before a request is sent, so a forged callback cannot send the code and client secret
    elsewhere.
    """

    #: The callback's query parameter, e.g. ``"accounts-server"``.
    parameter: str
    servers: frozenset[str]
    token_path: str
    profile_path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderFacts:
    """One provider, declaratively: a built-in one, or a custom
    :class:`~flask_social_oauth2.providers.BuiltinProvider` subclass's ``facts`` (which needs
    only the fields that differ from the defaults).

    Endpoints with ``${VAR}`` (per-tenant providers) are what ``flask social init`` writes;
    at run time the block's own ``authorizationURL``/``accessTokenURL`` are used.
    """

    #: The configuration block name that selects this provider, e.g. ``"github"`` (empty for
    #: a custom provider: the app names its class for a block).
    name: str = ""
    #: The heading of its docs section, e.g. ``"GitHub"``.
    title: str = ""
    #: The name of the provider's class (generated when :attr:`code` is ``False``).
    class_name: str = ""
    #: The endpoints ``flask social init`` writes (the block's own are used at run time).
    authorization_url: str | None = None
    token_url: str = ""
    #: The built-in profile address (``None``: derived, or from OpenID Connect discovery).
    profile_url: str | None = None
    #: ``(pattern, template)`` pairs tried in order on ``accessTokenURL`` (query, fragment
    #: and a trailing slash dropped): the first full match, expanded, is the profile address.
    profile_url_from_token_url: tuple[tuple[str, str], ...] = ()
    #: How the docs table shows a derived profile address, or where the profile comes from
    #: when the provider has no address (Apple: the ID token).
    profile_url_shown: str | None = None
    #: Replaces the "apiURL is required" message when no address can be derived.
    api_url_hint: str | None = None
    #: The fixed OpenID Connect issuer.
    issuer: str | None = None
    #: ``(pattern, template)`` deriving a per-tenant issuer from ``accessTokenURL``.
    issuer_from_token_url: tuple[str, str] | None = None
    #: ``iss`` values its ID tokens may carry besides the issuer.
    extra_id_token_issuers: frozenset[str] = frozenset()
    scope: tuple[str, ...] = ()
    scope_separator: str = " "
    client_auth: TokenAuthMethod = "client_secret_post"
    #: Whether the provider accepts a PKCE challenge (the flow always sends one).
    pkce: bool = True
    profile: ProfileFields = OPENID_FIELDS
    profile_method: Literal["GET", "POST"] = "GET"
    #: A JSON body of the profile ``POST`` (Dropbox's RPC endpoints take ``null``).
    profile_json_body: str | None = None
    #: Query parameters of the profile request.
    profile_params: tuple[Param, ...] = ()
    #: Form fields of a profile ``POST`` (with :attr:`Quirk.TOKEN_IN_FORM_BODY`).
    profile_form: tuple[Param, ...] = ()
    #: Headers of every API call.
    api_headers: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    #: The scheme of the ``Authorization`` header of API calls (Yandex: ``OAuth``, Zoho:
    #: ``Zoho-oauthtoken``).
    api_token_scheme: str = "Bearer"
    #: Dotted path of the token answer's field that already holds the profile (Strava's
    #: ``athlete``, Notion's ``owner.user``); the profile address is called only when it is
    #: absent.
    profile_in_token_answer: str | None = None
    #: The field of the token answer whose value is the profile address (Salesforce's ``id``).
    profile_url_from_token_answer: str | None = None
    #: The field of the token answer whose value is the user's API base (Salesforce's
    #: ``instance_url``); stated in the docs, read by the application from ``info.params``.
    api_base_from_token_answer: str | None = None
    #: The query parameter that carries the token instead of the header (Foursquare's
    #: ``oauth_token``; the provider's own host only).
    token_query_parameter: str | None = None
    #: Where the callback decides the token server (Zoho).
    callback_token_server: CallbackTokenServer | None = None
    #: Whether the provider gives no profile at all, only an API answer with the user's id.
    no_profile_endpoint: bool = False
    email_list: EmailList | None = None
    quirks: frozenset[Quirk] = frozenset()
    #: Checks of the ``customProperties`` the provider reads.
    property_rules: tuple[PropertyRule, ...] = ()
    #: Base of relative URLs for API calls after sign-in.
    api_base: str | None = None
    #: RFC 7009 revocation endpoint, where the provider has one at a fixed address.
    revocation_url: str | None = None
    #: The ``clientSecret`` of the block ``flask social init`` writes (default
    #: ``${<NAME>_CLIENT_SECRET}``), for a provider whose secret is something else (a key).
    init_client_secret: str | None = None
    #: Parameters the authorization request always carries unless the block's
    #: ``authorizationParams`` sets them (Atlassian's ``audience``, Notion's ``owner``).
    authorization_params: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    #: Extra entries of the block ``flask social init`` writes.
    init_authorization_params: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    init_custom_properties: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    #: Whether the provider has a class with code of its own (else one is generated).
    code: bool = False
    #: What that code does, as the docs table lists it.
    code_quirks: tuple[str, ...] = ()
    #: The paragraph(s) of docs/providers.md (Markdown), before the ready block.
    docs: str = ""

    @property
    def openid_connect(self) -> bool:
        """Whether the provider speaks OpenID Connect (has a fixed or derived issuer)."""
        return self.issuer is not None or self.issuer_from_token_url is not None

    @property
    def rules(self) -> tuple[PropertyRule, ...]:
        """Every ``customProperties`` check: :attr:`property_rules` and those its quirks imply."""
        implied = []
        if self.email_list is not None:
            implied.append(PropertyRule("emailsURL", "url"))
        if Quirk.DESCRIPTIVE_USER_AGENT in self.quirks:
            implied.append(PropertyRule("userAgent", "line"))
        if self.callback_token_server is not None:
            implied.append(PropertyRule("accountsServers", "urls"))
        return (*self.property_rules, *implied)

    def read_options(self, read: PropertyReader) -> FactsOptions:
        """The ``customProperties`` these facts name, checked (:attr:`rules`) and parsed."""
        for rule in self.rules:
            value = read.text(rule.key)
            message = None if value is None else rule.problem(value)
            if message is not None:
                read.problem(rule.key, message)
        params = (*self.profile_params, *self.profile_form)
        named = {param.property: read.text(param.property) for param in params if param.property}
        return FactsOptions(
            user_agent=read.text("userAgent"),
            emails_url=read.text("emailsURL"),
            accounts_servers=read.words("accountsServers"),
            profile_params=MappingProxyType(
                {key: value for key, value in named.items() if value is not None}
            ),
        )

    @property
    def custom_properties(self) -> tuple[str, ...]:
        """The ``customProperties`` keys the provider reads, in order."""
        keys = [
            param.property
            for param in (*self.profile_params, *self.profile_form)
            if param.property is not None
        ]
        keys += [rule.key for rule in self.rules]
        return tuple(dict.fromkeys(keys))
