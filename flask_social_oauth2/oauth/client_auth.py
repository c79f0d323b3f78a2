"""How the client proves itself to the provider's token, PAR and revocation endpoints.

``customProperties.tokenEndpointAuthMethod`` chooses: ``client_secret_post`` (the secret in the
form body), ``client_secret_basic`` (HTTP Basic), ``private_key_jwt`` (RFC 7523 with a private
key: the block's ``clientSecret`` holds its PEM, ``customProperties.keyID`` its ``kid``),
``client_secret_jwt`` (an HS256 assertion with the secret) or ``none`` (a public client). An
assertion is made fresh for every request (unique ``jti``, ``exp`` within a minute), since a
server may spend its ``jti`` even on a request it then refuses. joserfc signs; nothing here
knows about Flask.
"""

from __future__ import annotations

import base64
import functools
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import quote

from .. import caches
from ..config.provider_options import CLIENT_AUTH_METHODS, ProviderOptions, read_provider_options
from ..config.settings import OAuth2Settings
from ..errors import ConfigurationProblem

if TYPE_CHECKING:
    from joserfc.jwk import ECKey, RSAKey

ClientAuthMethod = Literal[
    "client_secret_post", "client_secret_basic", "private_key_jwt", "client_secret_jwt", "none"
]
#: Every method a block may name.
METHODS: Final[tuple[str, ...]] = CLIENT_AUTH_METHODS
#: The ``customProperties`` keys of client authentication.
METHOD_KEY: Final = "tokenEndpointAuthMethod"
KEY_ID_KEY: Final = "keyID"
#: RFC 7523 2.2.
ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: Seconds an assertion is valid.
ASSERTION_LIFETIME: Final = 60
_SMALLEST_RSA_BITS: Final = 2048
_CURVE_NAMES: Final = {"secp384r1": "P-384", "secp521r1": "P-521"}
#: Bytes of a secret that signs HS256 assertions: the hash's size (RFC 7518 3.2).
_SMALLEST_HS256: Final = 32


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """What one request carries to authenticate the client: headers and form fields.

    ``repr`` never shows their values (a secret, or an assertion)."""

    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    fields: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __repr__(self) -> str:
        names = [*self.headers, *(name for name, _ in self.fields)]
        return f"ClientCredentials(<{', '.join(names)}>)"


def normalize_pem(value: str) -> str:
    """The PEM text of ``value``, where a key pasted into one environment variable line may
    have its line breaks written as ``\\n``."""
    text = value.strip()
    if "\n" not in text and "\\n" in text:
        text = text.replace("\\n", "\n")
    return text


@functools.lru_cache(maxsize=64)
def load_signing_key(pem: str) -> ECKey | RSAKey:
    """The private key of a PEM text: EC P-256 (signs ES256) or RSA of 2048 bits or more
    (signs RS256). Parsed once per process per key (a parsed key, never shown by ``repr``).

    :raises ValueError: when ``pem`` is not such a key; the message never repeats it.
    """
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from joserfc.jwk import ECKey, RSAKey

    text = normalize_pem(pem)
    if "PUBLIC KEY-----" in text:
        raise ValueError("is a public key; it must be the private key")
    try:
        loaded = load_pem_private_key(text.encode("utf-8"), password=None)
    except (ValueError, TypeError, UnicodeError):
        raise ValueError("is not an unencrypted PEM private key (EC P-256 or RSA)") from None
    if isinstance(loaded, ec.EllipticCurvePrivateKey):
        if loaded.curve.name != "secp256r1":
            curve = _CURVE_NAMES.get(loaded.curve.name, loaded.curve.name)
            raise ValueError(f"is a {curve} key; EC keys must be P-256 (ES256)")
        return ECKey.import_key(text)
    if isinstance(loaded, rsa.RSAPrivateKey):
        if loaded.key_size < _SMALLEST_RSA_BITS:
            raise ValueError(
                f"is a {loaded.key_size}-bit RSA key; at least {_SMALLEST_RSA_BITS} bits"
            )
        return RSAKey.import_key(text)
    raise ValueError(f"is a {type(loaded).__name__}; it must be EC P-256 or RSA")


caches.register("client assertion keys", load_signing_key.cache_clear)


def algorithm_of(key: ECKey | RSAKey) -> str:
    """The JWS algorithm a signing key signs with: ES256 or RS256."""
    from joserfc.jwk import ECKey

    return "ES256" if isinstance(key, ECKey) else "RS256"


def sign_jwt(claims: Mapping[str, Any], key: Any, algorithm: str, **header: str) -> str:
    """``claims`` signed as a compact JWT with ``key`` (joserfc)."""
    from joserfc import jwt

    return jwt.encode({"alg": algorithm, **header}, dict(claims), key, algorithms=[algorithm])


def method_of(options: ProviderOptions, default: str) -> ClientAuthMethod:
    """The block's ``tokenEndpointAuthMethod``, else ``default``."""
    method = options.token_auth_method or default
    assert method in METHODS, method  # checked when the configuration was loaded
    return method  # type: ignore[return-value]  # narrowed by the assertion


def settings_problems(
    settings: OAuth2Settings, options: ProviderOptions
) -> list[ConfigurationProblem]:
    """A ``private_key_jwt`` block whose ``clientSecret`` is not a usable private key, or a
    ``client_secret_jwt`` one whose secret is too short (the method itself is checked by
    :func:`~flask_social_oauth2.config.provider_options.read_provider_options`)."""
    method = options.token_auth_method
    if method == "private_key_jwt":
        try:
            load_signing_key(settings.client_secret)
        except ValueError as error:
            return [ConfigurationProblem(None, "clientSecret", f"{error} (private_key_jwt)")]
    if method == "client_secret_jwt" and len(settings.client_secret.encode()) < _SMALLEST_HS256:
        return [
            ConfigurationProblem(
                None,
                "clientSecret",
                f"must have at least {_SMALLEST_HS256} bytes to sign HS256 assertions"
                " (client_secret_jwt; RFC 7518 3.2)",
            )
        ]
    return []


def credentials(
    method: ClientAuthMethod,
    settings: OAuth2Settings,
    *,
    audience: str,
    now: float | None = None,
    key_id: str | None = None,
) -> ClientCredentials:
    """The client authentication of one request, made now.

    :param method: How the client authenticates.
    :param settings: The block: its client id and secret (a PEM key for ``private_key_jwt``).
    :param audience: The assertion's ``aud``: the issuer, else the endpoint's URL.
    :param key_id: The ``kid`` of a ``private_key_jwt`` key (``customProperties.keyID``).
    """
    client_id = settings.client_id
    if method == "client_secret_post":
        return ClientCredentials(fields=(("client_secret", settings.client_secret),))
    if method == "client_secret_basic":
        return ClientCredentials(
            headers={"Authorization": basic_credentials(client_id, settings.client_secret)}
        )
    if method == "none":
        return ClientCredentials()
    issued = int(time.time() if now is None else now)
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "jti": secrets.token_urlsafe(24),
        "iat": issued,
        "exp": issued + ASSERTION_LIFETIME,
    }
    if method == "private_key_jwt":
        key = load_signing_key(settings.client_secret)
        header = {"kid": key_id} if key_id else {}
        assertion = sign_jwt(claims, key, algorithm_of(key), **header)
    else:
        from joserfc.jwk import OctKey

        secret = OctKey.import_key(settings.client_secret.encode("utf-8"))
        assertion = sign_jwt(claims, secret, "HS256")
    return ClientCredentials(
        fields=(("client_assertion_type", ASSERTION_TYPE), ("client_assertion", assertion))
    )


def basic_credentials(client_id: str, client_secret: str) -> str:
    """An ``Authorization`` header value for HTTP Basic client authentication, each part
    form-encoded first as RFC 6749 2.3.1 requires."""
    pair = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")


def public_jwks(
    settings: OAuth2Settings, options: ProviderOptions | None = None
) -> dict[str, list[dict[str, Any]]] | None:
    """The public JWK set of a ``private_key_jwt`` block, to register with the provider and
    served at ``<url rule>/jwks.json``: ``{"keys": [...]}`` with the public members only (and
    ``kid``, ``use``, ``alg``); ``None`` for any other block.

    :param options: The block's parsed ``customProperties`` (a provider's
        :attr:`~flask_social_oauth2.OAuth2Provider.options`); parsed from ``settings`` when not
        given.
    """
    if options is None:
        options = read_provider_options(settings)[0]
    if options.token_auth_method != "private_key_jwt":  # noqa: S105 - a method's name
        return None
    key = load_signing_key(settings.client_secret)
    public = key.as_dict(private=False)
    if options.key_id:
        public["kid"] = options.key_id
    public.update(use="sig", alg=algorithm_of(key))
    return {"keys": [public]}
