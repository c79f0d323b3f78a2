"""Sign in with Bluesky (the AT Protocol OAuth profile): the flow starts from a handle or DID,
resolved to the account's PDS and authorization server, which the flow is bound to; PAR, PKCE,
DPoP and ``iss`` always; the token's ``sub`` must be the account the flow started with. The
client is the loopback development client, or a published one whose client metadata document
the extension serves (``private_key_jwt``)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeAlias
from urllib.parse import quote, urlencode, urlsplit

from flask import request

from .. import atproto
from ..atproto.client_metadata import DISPLAY_FIELDS
from ..config.profile_fields import ProfileFields
from ..config.provider_options import PropertyReader
from ..config.settings import OAuth2Info, OAuth2Settings
from ..errors import (
    ConfigurationProblem,
    ProfileRetrievalError,
    ResolutionError,
    StateError,
    UnexpectedResponseError,
)
from ..oauth import client_auth, flow, par
from ..oauth.dpop import DPoPKey
from ..web import form_post
from ..web.redirects import resolve_redirect_uri
from ..web.state_cookie import PendingFlow
from .base import BuiltinProvider, provider_class
from .facts import PropertyRule, ProviderFacts
from .hooks import HookedProvider, ProviderHooks

#: The scope asked when the block sets none.
DEFAULT_SCOPE: Final = "atproto transition:generic"
#: The ``clientID`` of the AT Protocol's loopback development client.
LOOPBACK_CLIENT: Final = "http://localhost"
#: The scope every AT Protocol token must be granted.
REQUIRED_SCOPE: Final = "atproto"
_PROFILE_COLLECTION: Final = "app.bsky.actor.profile"
#: What the token info keeps of the account and its server (short strings, stored with it).
_KEPT: Final[tuple[str, ...]] = (
    "did",
    "handle",
    "pds",
    "issuer",
    "token_endpoint",
    "revocation_endpoint",
    "client_id",
)

logger = logging.getLogger("flask_social_oauth2")

FACTS: Final = ProviderFacts(
    name="bluesky",
    title="Bluesky",
    class_name="BlueskyProvider",
    code=True,
    code_quirks=(
        "the flow starts from a handle or DID resolved to the account's own server",
        "PAR, PKCE, DPoP and `iss` always; the token's `sub` must be the account",
        "profile and API calls on the account's PDS",
    ),
    authorization_url="https://bsky.social/oauth/authorize",
    token_url="https://bsky.social/oauth/token",
    profile_url_shown="the account's PDS: `com.atproto.repo.getRecord` of its profile",
    scope=("atproto", "transition:generic"),
    client_auth="none",
    init_client_secret="${BLUESKY_PRIVATE_KEY}",
    profile=ProfileFields(
        provider_key="did",
        username="handle",
        full_name="displayName",
        avatar_url="avatar",
    ),
    property_rules=(
        PropertyRule("handleResolver", "url"),
        PropertyRule("plcURL", "url"),
        PropertyRule("allowLoopback", "choice", ("true", "false")),
        PropertyRule("clientName", "line"),
        PropertyRule("clientURI", "url"),
        PropertyRule("logoURI", "url"),
        PropertyRule("tosURI", "url"),
        PropertyRule("policyURI", "url"),
    ),
    docs="""\
Sign in with Bluesky, or with any AT Protocol account. The sign-in starts at
`/authenticate/bluesky?handle=alice.bsky.social` (a handle or a DID, e.g. from a small form of
your own): the handle resolves to its DID (`customProperties.handleResolver`, an XRPC service
answering `com.atproto.identity.resolveHandle`; default `https://<handle>/.well-known/atproto-did`,
then the DNS TXT record `_atproto.<handle>` through the system's resolvers or
`customProperties.dnsResolver`, an IP address with an optional port),
the DID to its document (did:plc through `customProperties.plcURL`, default
`https://plc.directory`; did:web), checked both ways, then its PDS and the PDS's authorization
server. Without a handle the flow starts at the authorization server at the origin of
`authorizationURL` (the entryway `https://bsky.social`). The flow is bound to that server:
the request is pushed (PAR) with PKCE, `login_hint` and a DPoP proof; the callback must carry its
`iss`; the code is redeemed at its token endpoint with DPoP (a `token_type` other than `DPoP`
is refused); and the answer's `sub` must be the DID the flow started with (or, started without
a handle, a DID whose PDS names that server), else a `StateError` and the tokens are dropped.

A published client's `clientID` is the URL of its client metadata document, which the
extension serves at `<url rule>/client-metadata.json` (`/authenticate/bluesky/client-metadata.json`;
a path is resolved against the request's host like `redirectURL`, and bound to the flow). The
document lists that URL as `client_id`, the resolved redirect URI, the scope,
`dpop_bound_access_tokens`, `private_key_jwt` with its `ES256`/`RS256` algorithm and
`jwks_uri` (the `jwks.json` served next to it), and `client_name`, `client_uri`, `logo_uri`,
`tos_uri`, `policy_uri` from `customProperties.clientName`, `clientURI` (on the client ID's
origin, a parent of its path), `logoURI`, `tosURI`, `policyURI`; both documents are served
with `Cache-Control: public, max-age=300`. The client authenticates with `private_key_jwt`:
`clientSecret` is its PEM private key (EC P-256 or RSA; anything else is a configuration
error), `keyID` its `kid` (default: the key's RFC 7638 thumbprint), and every PAR, token,
refresh and revocation request carries a fresh assertion whose `aud` is the flow's server.
`clientID: http://localhost` is the AT Protocol's loopback development client instead: public,
no `clientSecret` used, no document served; the `client_id` sent is
`http://localhost?redirect_uri=<the resolved redirect URI>&scope=<scope>`, and the redirect URI
must be on `127.0.0.1`. Default scope `atproto transition:generic`.

The token answer must grant `atproto` (else a 502). Tokens dropped for a wrong `sub` or a
missing `atproto` are revoked at the server that issued them, when its metadata names a
revocation endpoint (a failed revocation is a warning). The profile: `provider_key` the DID,
`username` the verified handle, display name and avatar from the account's
`app.bsky.actor.profile` record, read from its PDS with `com.atproto.repo.getRecord` and the
DPoP-bound token (no record: no display name). The token info keeps `did`, `handle`, `pds`,
`issuer` and the server's endpoints in its params, so refresh and revocation go to that
server; `social.api("bluesky")` joins relative URLs to the identity's PDS
(`xrpc/com.atproto.server.getSession`). Every resolution fetch is https only, to public
addresses, bounded in size and time; `customProperties.allowLoopback: "true"` (development and
tests only) allows http on loopback.
""",
)


@dataclass(frozen=True, slots=True)
class BlueskyOptions:
    """The ``customProperties`` only Bluesky reads (``allowLoopback`` is a generic one)."""

    #: ``handleResolver``: the XRPC service that resolves handles (else DNS and HTTPS).
    handle_resolver: str | None
    #: ``plcURL``: the did:plc directory.
    plc_url: str
    #: ``dnsResolver``: the nameserver asked for ``_atproto`` TXT records (else the system's).
    dns_resolver: str | None
    #: The client metadata document's displayed fields (``clientName``, ``clientURI``, ...).
    display: Mapping[str, str]


class BlueskyHooks(ProviderHooks):
    """Sign in with Bluesky (see :data:`FACTS`). The registered provider is unbound; the flow
    uses a copy bound to the server it resolved (its ``context``)."""

    __slots__ = ()

    api_base_per_identity = True
    revokes_refused_tokens = True

    # -- configuration ---------------------------------------------------------------------

    def prepare_settings(self, settings: OAuth2Settings) -> OAuth2Settings:
        return _client_auth_settings(settings)

    def issuer(self, settings: OAuth2Settings, issuer: str | None) -> str | None:
        """None: the issuer is each flow's own (its context's)."""
        return None

    def read_options(self, read: PropertyReader) -> BlueskyOptions:
        """Besides the forms :data:`FACTS` checks: ``dnsResolver`` is an IP address (with an
        optional port); a published client authenticates with ``private_key_jwt`` (the
        loopback client with ``none``), and its ``clientID`` is the URL (or path) of the
        client metadata document, on the origin of ``clientURI``."""
        nameserver = read.text("dnsResolver")
        if nameserver is not None:
            try:
                atproto.DnsTxtLookup(nameserver)
            except ValueError as wrong:
                read.problem("dnsResolver", str(wrong))
        published = is_published(read.settings)
        wanted = "private_key_jwt" if published else "none"
        method = read.text(client_auth.METHOD_KEY)
        if method is not None and method != wanted:
            which = "a published client" if published else "the loopback client"
            read.problem(client_auth.METHOD_KEY, f"must be {wanted} for {which}")
        if published:
            client_id = read.settings.client_id
            read.problems.extend(atproto.client_id_problems(client_id, read.text("clientURI")))
        return BlueskyOptions(
            handle_resolver=read.text("handleResolver"),
            plc_url=read.text("plcURL") or atproto.DEFAULT_PLC_URL,
            dns_resolver=nameserver,
            display=MappingProxyType({k: v for k in DISPLAY_FIELDS if (v := read.text(k))}),
        )

    def settings_problems(
        self, settings: OAuth2Settings, problems: list[ConfigurationProblem]
    ) -> list[ConfigurationProblem]:
        """Besides the shared checks: ``authorizationURL`` (the entryway) is required."""
        problems = [problem for problem in problems if problem.key != "apiURL"]
        if settings.authorization_url is None:
            problems.append(
                ConfigurationProblem(None, "authorizationURL", "is required (the entryway)")
            )
        return problems

    def uses_dpop(self, settings: OAuth2Settings) -> bool:
        """Always: the AT Protocol takes only DPoP-bound tokens."""
        return True

    def uses_nonce(self, settings: OAuth2Settings) -> bool:
        return False

    def uses_discovery(self) -> bool:
        return False

    # -- the flow ----------------------------------------------------------------------------

    def flow_context(self, provider: HookedProvider) -> tuple[tuple[str, str], ...]:
        """The account (``?handle=``) resolved to its PDS and authorization server, or, without
        a handle, the authorization server at the origin of ``authorizationURL``.

        :raises InvalidIdentifierError: (400) for a malformed handle or DID.
        :raises ResolutionError: (502, 504) when a step of the resolution fails.
        """
        typed = (request.args.get("handle") or "").strip()
        bound: dict[str, str] = {}
        if typed:
            resolved = _resolve(provider, typed)
            metadata = resolved.metadata
            bound = {"did": resolved.did, "pds": resolved.pds, "login_hint": typed}
            if resolved.handle is not None:
                bound["handle"] = resolved.handle
        else:
            entry = urlsplit(provider.settings.authorization_url or "")
            issuer = f"{entry.scheme}://{entry.netloc}"
            metadata = atproto.authorization_server_metadata(issuer, fetch=_fetcher(provider))
        bound |= {
            "issuer": metadata.issuer,
            "par": metadata.pushed_authorization_request_endpoint,
            "authorize": metadata.authorization_endpoint,
            "token_endpoint": metadata.token_endpoint,
        }
        if metadata.revocation_endpoint is not None:
            bound["revocation_endpoint"] = metadata.revocation_endpoint
        if is_published(provider.settings):  # a path is this request's host's, as redirectURL
            bound["client_id"] = resolve_redirect_uri(provider.settings.client_id)
        return tuple(bound.items())

    def bound_settings(
        self, settings: OAuth2Settings, context: Mapping[str, str], redirect_uri: str
    ) -> tuple[OAuth2Settings, Mapping[str, str]]:
        scope = settings.scope or DEFAULT_SCOPE
        client_id = context.get("client_id") or settings.client_id
        if client_id == LOOPBACK_CLIENT:
            query = urlencode({"redirect_uri": redirect_uri, "scope": scope})
            client_id = f"{LOOPBACK_CLIENT}?{query}"
        bound = {**context, "client_id": client_id}
        return settings.replace(client_id=client_id, scope=scope), bound

    def authorization_url(
        self, provider: HookedProvider, pending: PendingFlow, dpop_key: DPoPKey | None
    ) -> str:
        """The request pushed to the bound server (PAR, PKCE, DPoP, ``login_hint``), and its
        authorization endpoint with ``client_id`` and ``request_uri``."""
        assert pending.verifier is not None
        settings, bound = provider.settings, provider.context
        hint = bound.get("login_hint")
        extra = list(form_post.request_params(settings, provider.options))
        if hint is not None:
            extra.append(("login_hint", hint))
        params = flow.authorization_params(
            settings,
            redirect_uri=pending.redirect_uri,
            state=pending.state,
            verifier=pending.verifier,
            extra=extra,
        )

        def body(client_fields: Any) -> str:
            return urlencode([*params, *client_fields])

        answer = provider.client.post_to_token_endpoint(
            bound["par"], body, step=par.STEP, dpop_key=dpop_key
        )
        request_uri = par.read_answer(provider.name, answer)
        return par.browser_url(bound["authorize"], settings.client_id, request_uri)

    def token_endpoint(self, provider: HookedProvider) -> str | None:
        """The bound server's token endpoint for the token and refresh requests."""
        return provider.context.get("token_endpoint")

    def revocation_url(self, provider: HookedProvider, built_in: str | None) -> str | None:
        """The bound server's revocation endpoint, when its metadata names one."""
        return provider.context.get("revocation_endpoint")

    def client_metadata(self, provider: HookedProvider) -> dict[str, Any] | None:
        """The client metadata document of a published client (served at
        ``<url rule>/client-metadata.json``): its ``client_id`` is ``clientID`` (a path
        resolved against this request's host, like ``redirectURL``), ``jwks_uri`` the
        ``jwks.json`` next to it; ``None`` for the loopback development client. Needs a
        request context."""
        settings = provider.settings
        if not is_published(settings):
            return None
        key = client_auth.load_signing_key(settings.client_secret)
        return atproto.client_metadata(
            client_id=resolve_redirect_uri(settings.client_id),
            redirect_uri=resolve_redirect_uri(settings.redirect_url),
            scope=settings.scope or DEFAULT_SCOPE,
            signing_alg=client_auth.algorithm_of(key),
            display=provider.options.own_as(BlueskyOptions).display,
        )

    def check_issuer(self, provider: HookedProvider, issuer: str | None) -> bool:
        """``iss`` is required, and must be the flow's server (RFC 9207)."""
        if issuer is None:
            raise StateError(provider.name, "callback lacks iss (the AT Protocol requires it)")
        expected = provider.context.get("issuer")
        if expected is None or issuer != expected:
            raise StateError(provider.name, "callback's iss is another issuer (mix-up refused)")
        return True

    def read_token_answer(
        self, provider: HookedProvider, info: OAuth2Info, pending: PendingFlow | None
    ) -> OAuth2Info:
        """The answer must grant the ``atproto`` scope, and its ``sub`` must be the flow's
        DID, or (started without a handle) a DID whose PDS names the flow's server; the account
        is then kept in the token's params. Tokens that fail are dropped, and revoked at the
        server that issued them when it can (:attr:`revokes_refused_tokens`).

        :raises UnexpectedResponseError: (502) when ``atproto`` is not granted.
        :raises StateError: when ``sub`` is not the account.
        """
        _check_scope(provider.name, info)
        return _verified_account(provider, info)

    def token_context(self, info: OAuth2Info) -> dict[str, str]:
        """The server that issued ``info`` (kept in its params)."""
        kept: dict[str, str] = {}
        for key in _KEPT:
            value = info.params.get(key)
            if isinstance(value, str):
                kept[key] = value
        return kept

    def refreshed(
        self, provider: HookedProvider, info: OAuth2Info, renewed: OAuth2Info
    ) -> OAuth2Info:
        """Refreshed at the token endpoint of the server that issued ``info``, with the same
        client id (and a fresh client assertion); the account must stay the same and
        ``atproto`` granted, else the new tokens are dropped (and revoked)."""
        kept = self.token_context(info)
        _check_scope(provider.name, renewed)
        if renewed.params.get("sub", kept.get("did")) != kept.get("did"):
            raise StateError(provider.name, "the refreshed token is another account's (sub)")
        return dataclasses.replace(renewed, params={**renewed.params, **kept})

    # -- the profile and the API -------------------------------------------------------------

    def api_base_for(self, provider: HookedProvider, info: OAuth2Info | None) -> str | None:
        """The identity's PDS."""
        pds = None if info is None else info.params.get("pds")
        return pds if isinstance(pds, str) else None

    def fetch_profile(self, provider: HookedProvider, info: OAuth2Info) -> Mapping[str, Any]:
        """The DID and handle the sign-in verified, with the display name and avatar of the
        account's profile record on its PDS (none without a record)."""
        return _profile(provider, info)


def _fetcher(provider: HookedProvider) -> atproto.GuardedFetcher:
    allow = provider.options.allow_loopback
    return atproto.GuardedFetcher(allow_loopback=allow, provider=provider.name)


def _resolve(provider: HookedProvider, handle_or_did: str) -> atproto.Resolved:
    options = provider.options.own_as(BlueskyOptions)
    return atproto.resolve(
        handle_or_did,
        resolver_url=options.handle_resolver,
        plc_url=options.plc_url,
        fetch=_fetcher(provider),
        dns=atproto.DnsTxtLookup(options.dns_resolver),
    )


def _verified_account(provider: HookedProvider, info: OAuth2Info) -> OAuth2Info:
    name = provider.name
    sub = info.params.get("sub")
    bound = dict(provider.context)
    if not isinstance(sub, str) or not atproto.is_did(sub):
        raise StateError(name, "the token answer names no account (sub)")
    if "did" in bound:
        if sub != bound["did"]:
            raise StateError(name, "the token is another account's than the sign-in's (sub)")
    else:
        try:
            resolved = _resolve(provider, sub)
        except ResolutionError:
            raise StateError(name, "the token's account (sub) cannot be resolved") from None
        if resolved.issuer != bound.get("issuer"):
            raise StateError(name, "the token's account (sub) is not of this authorization server")
        bound |= {"did": resolved.did, "pds": resolved.pds}
        if resolved.handle is not None:
            bound["handle"] = resolved.handle
    kept = {key: bound[key] for key in _KEPT if key in bound}
    return dataclasses.replace(info, params={**info.params, **kept})


def _profile(provider: HookedProvider, info: OAuth2Info) -> Mapping[str, Any]:
    did, pds = info.params.get("did"), info.params.get("pds")
    if not isinstance(did, str) or not isinstance(pds, str):
        raise ProfileRetrievalError(provider.name, "the token names no account and PDS")
    raw: dict[str, Any] = {"did": did, "handle": info.params.get("handle")}
    answer = provider.request_answer(
        "GET",
        pds.rstrip("/") + "/xrpc/com.atproto.repo.getRecord",
        info,
        params={"repo": did, "collection": _PROFILE_COLLECTION, "rkey": "self"},
    )
    try:
        record = answer.json()
    except ValueError:
        record = None
    not_found = isinstance(record, dict) and record.get("error") == "RecordNotFound"
    if answer.status == 400 and not_found:
        return raw
    if answer.status != 200 or not isinstance(record, dict):
        raise ProfileRetrievalError(provider.name, f"profile request failed: HTTP {answer.status}")
    value = record.get("value")
    if isinstance(value, dict):
        raw["record"] = value
        if isinstance(value.get("displayName"), str):
            raw["displayName"] = value["displayName"]
        avatar = value.get("avatar")
        link = avatar.get("ref") if isinstance(avatar, dict) else None
        cid = link.get("$link") if isinstance(link, dict) else None
        if isinstance(cid, str):
            raw["avatar"] = (
                pds.rstrip("/")
                + "/xrpc/com.atproto.sync.getBlob?did="
                + quote(did, safe="")
                + "&cid="
                + quote(cid, safe="")
            )
    return raw


if TYPE_CHECKING:  # for type checkers, the class is what it is: a BuiltinProvider
    BlueskyProvider: TypeAlias = BuiltinProvider
else:
    BlueskyProvider = provider_class(
        FACTS,
        BlueskyHooks(),
        module=__name__,
        doc="Sign in with Bluesky: the flow bound to the account's own server (see ``FACTS``).",
    )


def is_published(settings: OAuth2Settings) -> bool:
    """Whether the block's client is a published one (``clientID`` the URL of its client
    metadata document), not the loopback development client."""
    client_id = settings.client_id
    return client_id != LOOPBACK_CLIENT and not client_id.startswith(LOOPBACK_CLIENT + "?")


def _client_auth_settings(settings: OAuth2Settings) -> OAuth2Settings:
    """``settings`` with the client authentication they imply: a published client signs
    ``private_key_jwt`` assertions (``keyID`` by default the key's RFC 7638 thumbprint: the
    AT Protocol wants a ``kid``); the loopback client is public."""
    if not is_published(settings):
        return settings
    properties = dict(settings.custom_properties)
    properties.setdefault(client_auth.METHOD_KEY, "private_key_jwt")
    if not properties.get(client_auth.KEY_ID_KEY):
        try:
            key = client_auth.load_signing_key(settings.client_secret)
        except ValueError:
            pass  # reported by settings_problems
        else:
            properties[client_auth.KEY_ID_KEY] = key.thumbprint()
    if properties == settings.custom_properties:
        return settings
    return settings.replace(custom_properties=properties)


def _check_scope(provider: str, info: OAuth2Info) -> None:
    """The AT Protocol requires the granted ``scope`` to name ``atproto``.

    :raises UnexpectedResponseError: (502) when it does not, or names no scope.
    """
    granted = info.params.get("scope")
    if not isinstance(granted, str) or REQUIRED_SCOPE not in granted.split():
        raise UnexpectedResponseError(
            provider, f"the token answer does not grant the {REQUIRED_SCOPE!r} scope"
        )
