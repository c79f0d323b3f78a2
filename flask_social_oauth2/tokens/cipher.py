"""Encryption of stored tokens at rest with Fernet (AES-128-CBC and HMAC-SHA256).

``SOCIAL_OAUTH2_TOKEN_KEYS`` lists Fernet keys: the first encrypts, all decrypt
(:class:`~cryptography.fernet.MultiFernet`), so a key is rotated by putting a new one first.
Without it, one key is derived from ``SECRET_KEY`` with HKDF and a fixed label, and keys
derived from ``SECRET_KEY_FALLBACKS`` also decrypt.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .. import caches
from ..errors import ConfigurationError, ConfigurationProblem

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

#: The HKDF label of the key derived from ``SECRET_KEY``: a fixed value, so that the derived
#: key differs from every other use of the secret (session signing, the state cookie).
KEY_LABEL: Final = b"flask-social-oauth2 token encryption v1"
KEYS_SETTING: Final = "SOCIAL_OAUTH2_TOKEN_KEYS"

__all__ = ["KEYS_SETTING", "InvalidToken", "TokenCipher", "app_cipher", "derive_key"]


class InvalidToken(Exception):
    """No key opens an encrypted token, or it was altered (:class:`TokenCipher.decrypt`)."""


# cryptography is imported when tokens are first encrypted, not with the app.


def derive_key(secret: str | bytes) -> bytes:
    """The Fernet key derived from an app secret (HKDF-SHA256, fixed label ``KEY_LABEL``)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    material = secret.encode() if isinstance(secret, str) else secret
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=KEY_LABEL).derive(material)
    return base64.urlsafe_b64encode(derived)


class TokenCipher:
    """Encrypts with the first key, decrypts with any.

    :param keys: Fernet keys (url-safe base64, as ``Fernet.generate_key()`` makes), newest
        first.
    """

    __slots__ = ("_fernet",)

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        from cryptography.fernet import Fernet, MultiFernet

        if not keys:
            raise ValueError("at least one key is needed")
        self._fernet: MultiFernet = MultiFernet([Fernet(key) for key in keys])

    def encrypt(self, data: bytes) -> str:
        """``data`` encrypted and authenticated, as ASCII text."""
        return self._fernet.encrypt(data).decode("ascii")

    def decrypt(self, token: str) -> bytes:
        """The data of ``token``.

        :raises ~flask_social_oauth2.tokens.InvalidToken: when no key opens it or it was
            altered.
        """
        from cryptography import fernet

        try:
            return self._fernet.decrypt(token.encode("ascii"))
        except fernet.InvalidToken:
            raise InvalidToken("no key opens the token, or it was altered") from None

    def __repr__(self) -> str:
        return "TokenCipher(keys=<hidden>)"


_cache: dict[tuple[Any, ...], TokenCipher] = {}
_cache_lock = threading.Lock()
#: Distinct key sets remembered; past it the cache starts again (an app that changes its keys
#: on every request must not grow memory).
_MAX_CACHED: Final = 64


def _clear_ciphers() -> None:
    with _cache_lock:
        _cache.clear()


caches.register("token ciphers", _clear_ciphers)


def app_cipher(config: Mapping[str, Any]) -> TokenCipher:
    """The cipher of an app's configuration, made once per distinct set of keys: the keys are
    checked, derived (HKDF) and the ciphers built on the first request of a key set, not on
    every request.

    :raises ConfigurationError: when the keys are missing or malformed.
    """
    inputs = _key_inputs(config)
    if inputs is not None:
        cipher = _cache.get(inputs)
        if cipher is not None:
            return cipher
    problems = token_key_problems(config)
    if problems:
        raise ConfigurationError(problems)
    cipher = TokenCipher(_keys(config))
    if inputs is not None:
        with _cache_lock:
            if len(_cache) >= _MAX_CACHED:
                _cache.clear()
            cipher = _cache.setdefault(inputs, cipher)
    return cipher


def _key_inputs(config: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What the keys of ``config`` are made from, as a cache key; ``None`` when it cannot be
    one (an unhashable or unexpected value: such a configuration is checked every time)."""
    configured = config.get(KEYS_SETTING)
    if configured is None:  # the common case, without the checks below
        secret, fallbacks = config.get("SECRET_KEY"), config.get("SECRET_KEY_FALLBACKS")
        if not fallbacks and (secret is None or type(secret) in (str, bytes)):
            return ("SECRET_KEY", secret)
    if configured is not None:
        if isinstance(configured, str | bytes) or not isinstance(configured, Sequence):
            return None
        inputs: tuple[Any, ...] = (KEYS_SETTING, *configured)
    else:
        fallbacks = config.get("SECRET_KEY_FALLBACKS") or ()
        if isinstance(fallbacks, str | bytes) or not isinstance(fallbacks, Sequence):
            return None
        inputs = ("SECRET_KEY", config.get("SECRET_KEY"), *fallbacks)
    if not all(isinstance(value, str | bytes) or value is None for value in inputs):
        return None
    return inputs


def token_key_problems(config: Mapping[str, Any]) -> list[ConfigurationProblem]:
    """What is wrong with the encryption keys of ``config`` (never showing a key)."""
    configured = config.get(KEYS_SETTING)
    if configured is None:
        if not config.get("SECRET_KEY"):
            return [
                ConfigurationProblem(
                    None,
                    KEYS_SETTING,
                    "tokens are kept encrypted: set SECRET_KEY (a key is derived from it) or"
                    f" {KEYS_SETTING}",
                )
            ]
        return []
    if isinstance(configured, str | bytes) or not isinstance(configured, Sequence):
        return [ConfigurationProblem(None, KEYS_SETTING, "must be a list of Fernet keys")]
    if not configured:
        return [ConfigurationProblem(None, KEYS_SETTING, "must list at least one Fernet key")]
    from cryptography.fernet import Fernet

    problems = []
    for index, key in enumerate(configured):
        try:
            Fernet(key)
        except (TypeError, ValueError):
            problems.append(
                ConfigurationProblem(
                    None,
                    KEYS_SETTING,
                    f"entry {index} is not a Fernet key (32 url-safe base64-encoded bytes,"
                    " as Fernet.generate_key() makes)",
                )
            )
    return problems


def _keys(config: Mapping[str, Any]) -> tuple[bytes, ...]:
    configured = config.get(KEYS_SETTING)
    if configured is not None:
        return tuple(key.encode() if isinstance(key, str) else key for key in configured)
    secrets = [config["SECRET_KEY"], *(config.get("SECRET_KEY_FALLBACKS") or ())]
    return tuple(derive_key(secret) for secret in secrets if secret)
