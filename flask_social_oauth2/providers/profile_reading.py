"""Reading the signed-in user's profile: the order of the profile hooks, and the generic
fetch (the profile address, else the discovered userinfo, else the verified ID token)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from ..config.profile_fields import ProfileFields
from ..config.settings import OAuth2Info, SocialProfile
from ..errors import ProfileRetrievalError
from ..web import id_token_sign_in
from .hooks import HookedProvider, ProviderHooks

logger = logging.getLogger("flask_social_oauth2")


class ProfileSource(HookedProvider, Protocol):
    """What reading a profile needs of a provider."""

    @property
    def hooks(self) -> ProviderHooks: ...

    def request_json(self, method: str, url: str, info: OAuth2Info | None, **kw: Any) -> Any: ...

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]: ...

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile: ...

    def complete_profile(self, info: OAuth2Info, profile: SocialProfile) -> SocialProfile: ...


def retrieve(provider: ProfileSource, info: OAuth2Info) -> SocialProfile:
    """See :meth:`OAuth2Provider.retrieve_profile <.oauth2.OAuth2Provider.retrieve_profile>`:
    fetched (by the hooks, else the provider), checked against the ID token, read, finished
    and completed, in that order; for a sign-in without an access token (an ID token the
    browser posted), read from the verified claims."""
    if not info.access_token:  # an ID token the browser posted: its verified claims
        return id_token_sign_in.profile(provider.name, info)
    hooks = provider.hooks
    fetched = hooks.fetch_profile(provider, info)
    raw = provider.fetch_profile(info) if fetched is None else fetched
    claims = info.id_token_claims
    if (
        claims is not None
        and isinstance(raw, Mapping)
        and "sub" in raw
        and raw is not claims
        and raw["sub"] != claims.get("sub")
    ):  # OpenID Connect Core 5.3.2: userinfo of another user must not be used
        raise ProfileRetrievalError(provider.name, "profile's sub is not the ID token's sub")
    hooks.check_profile_answer(provider, raw)
    profile = hooks.read_profile(provider, raw, info, provider.parse_profile(raw, info))
    logger.info("%s: profile retrieved", provider.name)
    profile = provider.complete_profile(info, profile)
    return hooks.complete_profile(provider, info, profile)


def fetch(provider: ProfileSource, info: OAuth2Info) -> Mapping[str, Any]:
    """See :meth:`OAuth2Provider.fetch_profile <.oauth2.OAuth2Provider.fetch_profile>`."""
    url = provider.profile_url
    if url is None and provider.issuer is not None:
        metadata = provider.openid_metadata()
        url = None if metadata is None else metadata.userinfo_endpoint
        if url is None and info.id_token_claims is not None:
            return info.id_token_claims
    if url is None:
        raise ProfileRetrievalError(provider.name, "no profile address (apiURL) is configured")
    raw: Mapping[str, Any] = provider.request_json("GET", url, info)
    return raw


def parse(name: str, fields: ProfileFields, raw: Any, info: OAuth2Info) -> SocialProfile:
    """See :meth:`OAuth2Provider.parse_profile <.oauth2.OAuth2Provider.parse_profile>`."""
    if not isinstance(raw, Mapping):
        raise ProfileRetrievalError(name, "profile answer is not a JSON object")
    profile = fields.extract(name, raw, info.params)
    if profile is None:
        raise ProfileRetrievalError(name, "profile answer has no user id")
    return profile
