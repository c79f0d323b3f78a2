"""OpenID Connect ID tokens: verification and claims checks (OpenID Connect Core 3.1.3.7).

The signature is checked with the provider's published keys (:func:`discovery.signing_keys`)
using a library (joserfc), never hand-written crypto; the algorithm against an allow-list of
asymmetric algorithms; ``iss``, ``aud``/``azp``, ``exp``, ``iat``, ``nbf`` with a small leeway;
and the ``nonce`` kept with the flow's state. Like :mod:`~flask_social_oauth2.oidc.discovery`,
this module sends nothing itself: the provider hands in a
:class:`~flask_social_oauth2.oidc.discovery.Source`.
"""

from __future__ import annotations

import dataclasses
import functools
import hmac
import importlib.util
import json
import logging
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from ..config import provider_options
from ..config.provider_options import ProviderOptions
from ..config.settings import OAuth2Info, OAuth2Settings
from ..errors import AuthenticationError, ConfigurationProblem, DiscoveryError, IdTokenError
from ..oauth.flow import safe_error_code
from ..oauth.metadata import ProviderMetadata, expected_token_issuer
from . import discovery, tenants
from .discovery import Source

if TYPE_CHECKING:
    from joserfc.jwk import Key
    from joserfc.jws import JWSRegistry
    from joserfc.jwt import JWTClaimsRegistry

logger = logging.getLogger("flask_social_oauth2")

#: Algorithms an ID token may be signed with: asymmetric ones only, never ``none`` or HMAC
#: (an HMAC "signed" with a public key would be forgeable by anyone).
SAFE_ALGORITHMS: Final = provider_options.SAFE_ALGORITHMS
#: Clock skew allowed on ``exp``, ``iat`` and ``nbf`` unless ``customProperties.idTokenLeeway``
#: says otherwise, and the most it may say.
DEFAULT_LEEWAY: Final = provider_options.DEFAULT_ID_TOKEN_LEEWAY
MAX_LEEWAY: Final = provider_options.MAX_ID_TOKEN_LEEWAY

_MAX_ID_TOKEN: Final = 16 * 1024
_ALGORITHM_KEY_TYPES: Final[Mapping[str, tuple[str, str | None]]] = MappingProxyType(
    {
        "RS256": ("RSA", None),
        "RS384": ("RSA", None),
        "RS512": ("RSA", None),
        "PS256": ("RSA", None),
        "PS384": ("RSA", None),
        "PS512": ("RSA", None),
        "ES256": ("EC", "P-256"),
        "ES384": ("EC", "P-384"),
        "ES512": ("EC", "P-521"),
        "EdDSA": ("OKP", None),
        "Ed25519": ("OKP", "Ed25519"),
    }
)


# -- configuration -------------------------------------------------------------------------------


def allowed_algorithms(
    options: ProviderOptions, metadata: ProviderMetadata | None = None
) -> frozenset[str]:
    """The algorithms an ID token may use: ``customProperties.idTokenAlgorithms`` (space
    separated) or :data:`SAFE_ALGORITHMS`, narrowed to what the discovery document lists in
    ``id_token_signing_alg_values_supported``; never an algorithm outside the safe set."""
    allowed = options.id_token_algorithms & SAFE_ALGORITHMS
    if metadata is not None and metadata.signing_algorithms is not None:
        allowed &= metadata.signing_algorithms
    return allowed


def settings_problems(*, verifies: bool) -> list[ConfigurationProblem]:
    """A provider that verifies ID tokens without the joserfc library (the values of
    ``idTokenAlgorithms`` and ``idTokenLeeway`` are checked by
    :func:`~flask_social_oauth2.config.provider_options.read_provider_options`).

    :param verifies: Whether this provider verifies ID tokens with its settings.
    """
    problems: list[ConfigurationProblem] = []
    if verifies and importlib.util.find_spec("joserfc") is None:
        problems.append(
            ConfigurationProblem(
                None,
                "scope",
                "asks for 'openid', and verifying ID tokens needs the joserfc library, a"
                " dependency of flask-social-oauth2 that is missing: pip install joserfc",
            )
        )
    return problems


# -- verification --------------------------------------------------------------------------------


def _matching_keys(keys: Iterable[Key], algorithm: str, kid: str | None) -> list[Key]:
    key_type, curve = _ALGORITHM_KEY_TYPES[algorithm]
    found = []
    for key in keys:
        if key.key_type != key_type or (kid is not None and key.kid != kid):
            continue
        if key.alg is not None and key.alg != algorithm:
            continue
        if curve is not None and getattr(key, "curve_name", None) != curve:
            continue
        found.append(key)
    return found


def verify_signature(
    source: Source,
    token: str,
    metadata: ProviderMetadata,
    algorithms: frozenset[str],
    error: type[AuthenticationError],
    what: str = "id_token",
) -> tuple[dict[str, Any], str]:
    """Verify the signature of a JWT the provider signed (an ID token, a logout token) with a
    key of its key set, fetched again once when no key matches the ``kid``: a JWS whose
    algorithm is one of ``algorithms`` (never ``none``, never HMAC).

    :return: Its claims, unchecked, and its algorithm.
    :raises AuthenticationError: (``error``, naming ``what``) when it fails.
    :raises DiscoveryError: when the key set cannot be fetched.
    """
    from joserfc import jws
    from joserfc.errors import JoseError

    name = source.provider
    try:
        signed = jws.extract_compact(token.encode("ascii"))
    except (JoseError, ValueError, TypeError, UnicodeError):
        raise error(name, f"{what} is not a signed JWT (JWS compact form)") from None
    header = signed.headers()
    algorithm = header.get("alg")
    if not isinstance(algorithm, str) or algorithm not in algorithms:
        shown = safe_error_code(algorithm) if isinstance(algorithm, str) else "<missing>"
        raise error(name, f"{what} algorithm {shown!r} is not allowed")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise error(name, f"{what} header's kid is not a string")
    if metadata.jwks_uri is None:
        raise DiscoveryError(name, "discovery document has no jwks_uri to verify ID tokens with")
    candidates = _matching_keys(discovery.signing_keys(source, metadata.jwks_uri), algorithm, kid)
    if not candidates:
        keys = discovery.signing_keys(source, metadata.jwks_uri, unknown_kid=True)
        candidates = _matching_keys(keys, algorithm, kid)
    if not candidates:
        raise error(name, f"no key of the provider's key set matches the {what}'s kid")
    registry = _registry(algorithm)
    for key in candidates:
        try:
            if not jws.validate_compact(signed, key, registry=registry):
                continue  # not this key's signature
        except (JoseError, ValueError, TypeError) as failure:
            raise error(name, f"{what} could not be verified ({type(failure).__name__})") from None
        return _claims(signed.payload, name, what, error), algorithm
    raise error(name, f"{what} signature is not valid")


@functools.cache
def _registry(algorithm: str) -> JWSRegistry:
    """joserfc's checks of a JWS signed with ``algorithm`` (read-only once made: shared)."""
    from joserfc import jws

    return jws.JWSRegistry(algorithms=[algorithm], strict_check_header=False)


def _claims(
    payload: bytes | None, name: str, what: str, error: type[AuthenticationError]
) -> dict[str, Any]:
    """The JSON object a verified JWS carries (as joserfc's ``jwt.decode`` reads it)."""
    try:
        claims = json.loads(payload or b"")
    except (TypeError, ValueError, RecursionError):
        claims = None
    if not isinstance(claims, dict):
        raise error(name, f"{what} could not be verified (InvalidPayloadError)")
    return claims


def verify_id_token(
    source: Source,
    settings: OAuth2Settings,
    options: ProviderOptions,
    id_token: object,
    metadata: ProviderMetadata,
    *,
    nonce: str | None,
    subject: str | None = None,
    extra_issuers: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Verify an ID token (OpenID Connect Core 3.1.3.7) and return its claims.

    :param source: The provider's name and how to fetch its key set.
    :param settings: The provider's settings (client id).
    :param options: Its ``customProperties`` (ID token algorithms, leeway).
    :param id_token: The token response's ``id_token``.
    :param metadata: The provider's discovery document.
    :param nonce: The nonce sent with the authorization request; the token must carry it.
        ``None`` when there was none to check (a refresh, or a code a client-side framework
        obtained).
    :param subject: The ``sub`` the token must have (a refresh must not change the user).
    :param extra_issuers: ``iss`` values accepted besides the document's issuer.
    :raises IdTokenError: naming the check that failed.
    :raises AccessDeniedError: when the token's tenant may not sign in (see :func:`check_claims`).
    :raises DiscoveryError: when the key set cannot be fetched.
    """
    name = source.provider
    if not isinstance(id_token, str) or not id_token or len(id_token) > _MAX_ID_TOKEN:
        raise IdTokenError(name, "token response's id_token is missing or not a string")
    claims, _ = verify_signature(
        source, id_token, metadata, allowed_algorithms(options, metadata), IdTokenError
    )
    check_claims(
        name,
        settings,
        options,
        claims,
        metadata,
        nonce=nonce,
        subject=subject,
        extra_issuers=extra_issuers,
    )
    return claims


@functools.cache
def _essential_claims(leeway: int) -> JWTClaimsRegistry:
    """joserfc's checks of the claims every ID token has, with ``leeway`` seconds of clock skew
    (read-only once made: shared)."""
    from joserfc import jwt

    return jwt.JWTClaimsRegistry(
        leeway=leeway,
        iss={"essential": True},
        sub={"essential": True},
        aud={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
    )


def check_claims(
    provider: str,
    settings: OAuth2Settings,
    options: ProviderOptions,
    claims: dict[str, Any],
    metadata: ProviderMetadata,
    *,
    nonce: str | None,
    subject: str | None = None,
    extra_issuers: frozenset[str] = frozenset(),
) -> None:
    """Check the claims of an ID token whose signature was verified (see
    :func:`verify_id_token` for the parameters), then its tenant against the block's
    ``customProperties.allowedTenants`` (:func:`.tenants.check_tenant`).

    :raises IdTokenError: naming the claim that failed, never its value.
    :raises AccessDeniedError: when the token's tenant may not sign in.
    """
    from joserfc.errors import ClaimError, ExpiredTokenError, MissingClaimError

    try:
        _essential_claims(options.id_token_leeway).validate(claims)
    except ExpiredTokenError:
        raise IdTokenError(provider, "id_token has expired (exp)") from None
    except MissingClaimError as error:
        raise IdTokenError(provider, f"id_token lacks the claims {error.claim}") from None
    except ClaimError as error:
        raise IdTokenError(provider, f"id_token claim {error.claim!r} is not valid") from None
    except (TypeError, ValueError, OverflowError):  # an odd value that joserfc did not expect
        raise IdTokenError(provider, "id_token has a claim of the wrong type") from None
    # Checked here too: joserfc's registry checks these types only since 1.8.
    for name in ("iss", "sub"):
        if not isinstance(claims[name], str):
            raise IdTokenError(provider, f"id_token claim {name!r} is not valid")
    audience = claims["aud"]
    if not (
        isinstance(audience, str)
        or (isinstance(audience, list) and all(isinstance(item, str) for item in audience))
    ):
        raise IdTokenError(provider, "id_token claim 'aud' is not valid")
    issuer = claims["iss"]
    if issuer != expected_token_issuer(metadata, claims) and issuer not in extra_issuers:
        raise IdTokenError(provider, "id_token iss is not the provider's issuer")
    client_id = settings.client_id
    audiences = [audience] if isinstance(audience, str) else list(audience)
    if client_id not in audiences:
        raise IdTokenError(provider, "id_token aud does not name this client")
    authorized_party = claims.get("azp")
    if len(audiences) > 1 and authorized_party is None:
        raise IdTokenError(provider, "id_token has several audiences and no azp")
    if authorized_party is not None and authorized_party != client_id:
        raise IdTokenError(provider, "id_token azp is not this client")
    if nonce is not None:
        value = claims.get("nonce")
        if not isinstance(value, str) or not hmac.compare_digest(
            value.encode("utf-8"), nonce.encode("utf-8")
        ):
            raise IdTokenError(provider, "id_token nonce is not the one of this sign-in")
    if subject is not None and claims["sub"] != subject:
        raise IdTokenError(provider, "id_token sub is not the user the token was issued for")
    tenants.check_tenant(provider, options.allowed_tenants, claims)


def verify_token_response(
    source: Source,
    settings: OAuth2Settings,
    options: ProviderOptions,
    info: OAuth2Info,
    issuer: str,
    *,
    nonce: str | None,
    required: bool = True,
    subject: str | None = None,
    extra_issuers: frozenset[str] = frozenset(),
) -> OAuth2Info:
    """Verify the ID token of a token response; ``info`` with :attr:`OAuth2Info.id_token_claims`.

    :param issuer: The provider's configured issuer (its discovery document is read through
        ``source``, from the cache when it can be).
    :param nonce: See :func:`verify_id_token`.
    :param required: Whether a response without ``id_token`` is an error (a code exchange with
        the ``openid`` scope) or accepted as it is (a refresh, where it is optional).
    :param subject: See :func:`verify_id_token`.
    :param extra_issuers: See :func:`verify_id_token`.
    :raises IdTokenError: when the ID token is missing (if required) or not valid.
    :raises DiscoveryError: when the discovery document or key set cannot be read.
    """
    id_token = info.params.get("id_token")
    if id_token is None:
        if required:
            raise IdTokenError(
                source.provider,
                "token response has no id_token although the scope asks for openid",
            )
        return info
    metadata = discovery.provider_metadata(source, settings, options, issuer)
    claims = verify_id_token(
        source,
        settings,
        options,
        id_token,
        metadata,
        nonce=nonce,
        subject=subject,
        extra_issuers=extra_issuers,
    )
    logger.info("%s: id_token verified", source.provider)
    return dataclasses.replace(info, id_token_claims=claims)
