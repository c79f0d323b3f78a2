"""Sign in with Bluesky (the AT Protocol OAuth profile): the flow starts from a handle or DID,
resolved to the account's PDS and authorization server, which the flow is bound to; PAR, PKCE,
DPoP and ``iss`` always; the token's ``sub`` must be the account the flow started with."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Final
from urllib.parse import quote, urlencode, urlsplit

from flask import request

from .. import atproto, flow, par
from ..dpop import DPoPKey
from ..errors import ConfigurationProblem, ProfileRetrievalError, ResolutionError, StateError
from ..profile_fields import ProfileFields
from ..settings import OAuth2Info, OAuth2Settings
from ..state_cookie import PendingFlow
from .base import BuiltinProvider
from .facts import PropertyRule, ProviderFacts

#: The scope asked when the block sets none.
DEFAULT_SCOPE: Final = "atproto transition:generic"
#: The ``clientID`` of the AT Protocol's loopback development client.
LOOPBACK_CLIENT: Final = "http://localhost"
_PROFILE_COLLECTION: Final = "app.bsky.actor.profile"
#: What the token info keeps of the account (short strings, stored with the token).
_KEPT: Final[tuple[str, ...]] = ("did", "handle", "pds", "issuer", "token_endpoint", "client_id")

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

`clientID: http://localhost` is the AT Protocol's loopback development client: public, no
`clientSecret` used; the `client_id` sent is
`http://localhost?redirect_uri=<the resolved redirect URI>&scope=<scope>`, and the redirect URI
must be on `127.0.0.1`. Default scope `atproto transition:generic`. Another `clientID` is
sent as it is (a public client's metadata document hosted elsewhere); the extension does not
serve a client metadata document or `private_key_jwt` for Bluesky yet.

The profile: `provider_key` the DID, `username` the verified handle, display name and avatar
from the account's `app.bsky.actor.profile` record, read from its PDS with
`com.atproto.repo.getRecord` and the DPoP-bound token (no record: no display name). The token
info keeps `did`, `handle`, `pds` and `issuer` in its params; `social.api("bluesky")` joins
relative URLs to the identity's PDS (`xrpc/com.atproto.server.getSession`). Every resolution
fetch is https only, to public addresses, bounded in size and time;
`customProperties.allowLoopback: "true"` (development and tests only) allows http on loopback.
""",
)


class BlueskyProvider(BuiltinProvider):
    """Sign in with Bluesky (see :data:`FACTS`). The registered provider is unbound; the flow
    uses a copy bound to the server it resolved (:meth:`for_flow`)."""

    __slots__ = ("_bound",)

    facts = FACTS
    api_base_per_identity: ClassVar[bool] = True

    def __init__(self, name: str, settings: OAuth2Settings) -> None:
        super().__init__(name, settings)
        self._bound: Mapping[str, str] = {}

    # -- configuration ---------------------------------------------------------------------

    @classmethod
    def issuer_for(cls, settings: OAuth2Settings) -> str | None:
        """None: the issuer is each flow's own (:meth:`for_flow`)."""
        return None

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        problems = [
            problem for problem in super().settings_problems(settings) if problem.key != "apiURL"
        ]
        if settings.authorization_url is None:
            problems.append(
                ConfigurationProblem(None, "authorizationURL", "is required (the entryway)")
            )
        nameserver = settings.custom_properties.get("dnsResolver")
        if nameserver is not None:
            try:
                atproto.DnsTxtLookup(nameserver)
            except ValueError as wrong:
                problems.append(
                    ConfigurationProblem(None, "customProperties.dnsResolver", str(wrong))
                )
        return problems

    @property
    def issuer(self) -> str | None:
        return self._bound.get("issuer")

    def uses_dpop(self) -> bool:
        """Always: the AT Protocol takes only DPoP-bound tokens."""
        return True

    def uses_nonce(self) -> bool:
        return False

    def openid_metadata(self) -> None:
        return None

    def _fetcher(self) -> atproto.GuardedFetcher:
        allow = self.settings.custom_properties.get("allowLoopback", "false") == "true"
        return atproto.GuardedFetcher(allow_loopback=allow, provider=self.name)

    def _resolve(self, handle_or_did: str) -> atproto.Resolved:
        properties = self.settings.custom_properties
        return atproto.resolve(
            handle_or_did,
            resolver_url=properties.get("handleResolver"),
            plc_url=properties.get("plcURL", atproto.DEFAULT_PLC_URL),
            fetch=self._fetcher(),
            dns=atproto.DnsTxtLookup(properties.get("dnsResolver")),
        )

    # -- the flow ----------------------------------------------------------------------------

    def flow_context(self) -> tuple[tuple[str, str], ...]:
        """The account (``?handle=``) resolved to its PDS and authorization server, or, without
        a handle, the authorization server at the origin of ``authorizationURL``.

        :raises InvalidIdentifierError: (400) for a malformed handle or DID.
        :raises ResolutionError: (502, 504) when a step of the resolution fails.
        """
        typed = (request.args.get("handle") or "").strip()
        bound: dict[str, str] = {}
        if typed:
            resolved = self._resolve(typed)
            metadata = resolved.metadata
            bound = {"did": resolved.did, "pds": resolved.pds, "login_hint": typed}
            if resolved.handle is not None:
                bound["handle"] = resolved.handle
        else:
            entry = urlsplit(self.settings.authorization_url or "")
            issuer = f"{entry.scheme}://{entry.netloc}"
            metadata = atproto.authorization_server_metadata(issuer, fetch=self._fetcher())
        bound |= {
            "issuer": metadata.issuer,
            "par": metadata.pushed_authorization_request_endpoint,
            "authorize": metadata.authorization_endpoint,
            "token_endpoint": metadata.token_endpoint,
        }
        return tuple(bound.items())

    def for_flow(self, pending: PendingFlow) -> BlueskyProvider:
        return self._bound_to(dict(pending.context), pending.redirect_uri)

    def _bound_to(self, bound: dict[str, str], redirect_uri: str) -> BlueskyProvider:
        settings = self.settings
        scope = settings.scope or DEFAULT_SCOPE
        client_id = bound.get("client_id") or settings.client_id
        if client_id == LOOPBACK_CLIENT:
            query = urlencode({"redirect_uri": redirect_uri, "scope": scope})
            client_id = f"{LOOPBACK_CLIENT}?{query}"
        copy = type(self)(self.name, settings.replace(client_id=client_id, scope=scope))
        copy._bound = {**bound, "client_id": client_id}
        return copy

    def authorization_url(self, pending: PendingFlow, dpop_key: DPoPKey | None = None) -> str:
        """The request pushed to the bound server (PAR, PKCE, DPoP, ``login_hint``), and its
        authorization endpoint with ``client_id`` and ``request_uri``."""
        assert pending.verifier is not None
        settings = self.settings
        hint = self._bound.get("login_hint")
        extra = () if hint is None else (("login_hint", hint),)
        params = flow.authorization_params(
            settings,
            redirect_uri=pending.redirect_uri,
            state=pending.state,
            verifier=pending.verifier,
            extra=extra,
        )

        def body(client_fields: Any) -> str:
            return urlencode([*params, *client_fields])

        answer = self._post_to_token_endpoint(par.STEP, body, self._bound["par"], dpop_key=dpop_key)
        request_uri = par.read_answer(self.name, answer)
        return par.browser_url(self._bound["authorize"], settings.client_id, request_uri)

    def token_endpoint(self, step: str, url: str) -> str:
        """The bound server's token endpoint for the token and refresh requests."""
        if step in ("token request", "refresh request"):
            return self._bound.get("token_endpoint", url)
        return url

    def check_issuer(self, issuer: str | None) -> None:
        """``iss`` is required, and must be the flow's server (RFC 9207)."""
        if issuer is None:
            raise StateError(self.name, "callback lacks iss (the AT Protocol requires it)")
        expected = self._bound.get("issuer")
        if expected is None or issuer != expected:
            raise StateError(self.name, "callback's iss is another issuer (mix-up refused)")

    def verify_token(self, info: OAuth2Info, pending: PendingFlow | None) -> OAuth2Info:
        """The answer's ``sub`` must be the flow's DID, or (started without a handle) a DID
        whose PDS names the flow's server; the account is then kept in the token's params.

        :raises StateError: otherwise (the tokens are dropped).
        """
        sub = info.params.get("sub")
        bound = dict(self._bound)
        if not isinstance(sub, str) or not atproto.is_did(sub):
            raise StateError(self.name, "the token answer names no account (sub)")
        if "did" in bound:
            if sub != bound["did"]:
                raise StateError(
                    self.name, "the token is another account's than the sign-in's (sub)"
                )
        else:
            try:
                resolved = self._resolve(sub)
            except ResolutionError:
                raise StateError(
                    self.name, "the token's account (sub) cannot be resolved"
                ) from None
            if resolved.issuer != bound.get("issuer"):
                raise StateError(
                    self.name, "the token's account (sub) is not of this authorization server"
                )
            bound |= {"did": resolved.did, "pds": resolved.pds}
            if resolved.handle is not None:
                bound["handle"] = resolved.handle
        kept = {key: bound[key] for key in _KEPT if key in bound}
        return dataclasses.replace(info, params={**info.params, **kept})

    def refresh(self, info: OAuth2Info, *, scope: str | None = None) -> OAuth2Info:
        """Refreshed at the token endpoint of the server that issued ``info``, with the same
        client id; the account must stay the same."""
        kept: dict[str, str] = {}
        for key in _KEPT:
            value = info.params.get(key)
            if isinstance(value, str):
                kept[key] = value
        bound = self._bound_to(kept, "")
        renewed = BuiltinProvider.refresh(bound, info, scope=scope)
        if renewed.params.get("sub", kept.get("did")) != kept.get("did"):
            raise StateError(self.name, "the refreshed token is another account's (sub)")
        return dataclasses.replace(renewed, params={**renewed.params, **kept})

    # -- the profile and the API -------------------------------------------------------------

    def api_base_for(self, info: OAuth2Info | None) -> str | None:
        """The identity's PDS."""
        pds = None if info is None else info.params.get("pds")
        return pds if isinstance(pds, str) else None

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        """The DID and handle the sign-in verified, with the display name and avatar of the
        account's profile record on its PDS (none without a record)."""
        did, pds = info.params.get("did"), info.params.get("pds")
        if not isinstance(did, str) or not isinstance(pds, str):
            raise ProfileRetrievalError(self.name, "the token names no account and PDS")
        raw: dict[str, Any] = {"did": did, "handle": info.params.get("handle")}
        answer = self.request_answer(
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
            raise ProfileRetrievalError(self.name, f"profile request failed: HTTP {answer.status}")
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
