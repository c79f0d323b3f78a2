"""LINE Login v2.1: the profile, and ID tokens signed with the channel secret (HS256)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ..config.profile_fields import ProfileFields, first_text
from ..config.settings import OAuth2Info, SocialProfile
from ..errors import IdTokenError
from ..oidc.id_token import check_claims
from ..web.state_cookie import PendingFlow
from .base import BuiltinProvider, provider_class
from .facts import ProviderFacts
from .hooks import HookedProvider, ProviderHooks

#: The one symmetric algorithm accepted, and only for LINE: its web login signs ID tokens
#: with the channel secret, which only LINE and this client know.
CHANNEL_SECRET_ALGORITHM: Final = "HS256"
_MAX_ID_TOKEN: Final = 16 * 1024

FACTS: Final = ProviderFacts(
    name="line",
    title="LINE",
    class_name="LineProvider",
    code=True,
    code_quirks=("HS256 ID tokens checked with the channel secret", "e-mail from the ID token"),
    authorization_url="https://access.line.me/oauth2/v2.1/authorize",
    token_url="https://api.line.me/oauth2/v2.1/token",
    profile_url="https://api.line.me/v2/profile",
    issuer="https://access.line.me",
    scope=("profile", "openid"),
    profile=ProfileFields(provider_key="userId", full_name="displayName", avatar_url="pictureUrl"),
    api_base="https://api.line.me/",
    revocation_url="https://api.line.me/oauth2/v2.1/revoke",
    docs="""\
Create a *LINE Login* channel in the [LINE Developers console](https://developers.line.biz/console/)
with the *Web app* type and add the callback URL; the channel ID is the `clientID`, the
channel secret the `clientSecret`. With `openid` the token answer has an ID token, which LINE's
web login signs with **HS256 keyed with the channel secret**: it is verified with that secret
(signature, `iss` `https://access.line.me`, `aud`, `exp`, `iat`, the flow's `nonce`); an ID
token with an asymmetric algorithm (LINE's SDKs use ES256) is verified with LINE's published
keys as for any OpenID Connect provider; no other algorithm is accepted. The profile is
`GET https://api.line.me/v2/profile`: `provider_key` is the `userId`, `full_name` the
`displayName`, `avatar_url` the `pictureUrl` (absent when the user has none). The e-mail
address is only in the verified ID token, only with the `email` scope (which LINE grants after
you apply for it); LINE does not say whether it is verified. A refreshed token has no new ID
token.
""",
)


def header_algorithm(id_token: str) -> str | None:
    """The ``alg`` of a compact JWS, or ``None`` when it cannot be read."""
    from joserfc import jws
    from joserfc.errors import JoseError

    try:
        algorithm = jws.extract_compact(id_token.encode("ascii")).headers().get("alg")
    except (JoseError, ValueError, TypeError, UnicodeError):
        return None
    return algorithm if isinstance(algorithm, str) else None


class LineHooks(ProviderHooks):
    """HS256 ID tokens verified with the channel secret; the e-mail address from the verified
    ID token."""

    __slots__ = ()

    def read_token_answer(
        self, provider: HookedProvider, info: OAuth2Info, pending: PendingFlow | None
    ) -> OAuth2Info | None:
        id_token = info.params.get("id_token")
        if (
            provider.issuer is None
            or not provider.uses_nonce()
            or not isinstance(id_token, str)
            or len(id_token) > _MAX_ID_TOKEN
            or header_algorithm(id_token) != CHANNEL_SECRET_ALGORITHM
        ):
            return None  # verified with LINE's published keys, as any OpenID Connect provider's
        claims = channel_secret_claims(provider.name, provider.settings.client_secret, id_token)
        metadata = provider.openid_metadata()
        assert metadata is not None
        nonce = pending.nonce if pending is not None else None
        check_claims(
            provider.name, provider.settings, provider.options, claims, metadata, nonce=nonce
        )
        return dataclasses.replace(info, id_token_claims=claims)

    def read_profile(
        self, provider: HookedProvider, raw: Any, info: OAuth2Info, profile: SocialProfile
    ) -> SocialProfile:
        claims = info.id_token_claims or {}
        email = first_text(claims, "email")
        if email is None:
            return profile
        return dataclasses.replace(profile, email=email, email_verified=None)


def channel_secret_claims(provider: str, channel_secret: str, id_token: str) -> dict[str, Any]:
    """The claims of an HS256 ID token whose signature the channel secret verifies.

    :raises IdTokenError: when it does not.
    """
    from joserfc import jwt
    from joserfc.errors import BadSignatureError, JoseError
    from joserfc.jwk import OctKey

    key = OctKey.import_key(channel_secret.encode("utf-8"))
    try:
        token = jwt.decode(id_token, key, algorithms=[CHANNEL_SECRET_ALGORITHM])
    except BadSignatureError:
        raise IdTokenError(provider, "id_token signature is not valid") from None
    except (JoseError, ValueError, TypeError) as error:
        raise IdTokenError(
            provider, f"id_token could not be verified ({type(error).__name__})"
        ) from None
    return dict(token.claims)


if TYPE_CHECKING:  # for type checkers, the class is what it is: a BuiltinProvider
    LineProvider: TypeAlias = BuiltinProvider
else:
    LineProvider = provider_class(
        FACTS,
        LineHooks(),
        module=__name__,
        doc="Sign in with LINE: HS256 ID tokens verified with the channel secret.",
    )
