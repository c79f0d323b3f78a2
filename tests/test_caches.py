"""Every process-wide cache is named in one place and emptied by one call."""

from __future__ import annotations

import time
from typing import Any

from flask_social_oauth2 import caches
from flask_social_oauth2.oauth import client_auth, dpop
from flask_social_oauth2.oidc import discovery
from flask_social_oauth2.oidc.document_cache import Entry
from flask_social_oauth2.providers import apple_secret
from flask_social_oauth2.tokens import cipher

ALL = (
    "discovery documents",
    "key sets",
    "DPoP nonces",
    "DPoP keys",
    "client assertion keys",
    "Apple client secrets",
    "token ciphers",
)


def test_every_process_wide_cache_is_registered() -> None:
    assert {*ALL} <= set(caches.registered())


def cached_document(fetches: list[float]) -> object:
    def fetch(entry: Any, now: float) -> Any:  # a stand-in for a metadata document
        fetches.append(now)
        return Entry(value=object(), fetched=now, expires=now + 3600)

    return discovery.process_caches().metadata.get(
        "https://id.example/.well-known/openid-configuration",
        provider="test",
        clock=time.monotonic,
        failure_ttl=30,
        usable=lambda entry, now: entry is not None and now < entry.expires,
        fetch=fetch,
    )


def test_clear_caches_empties_every_one(ec_key: Any) -> None:
    pem = ec_key.as_pem(private=True).decode()
    fetches: list[float] = []
    cached_document(fetches)
    cached_document(fetches)
    dpop.nonces.remember("https://as.example/token", "nonce-1")
    dpop.loaded_keys.load(dpop.DPoPKey.generate().export())
    client_auth.load_signing_key(pem)
    first = cipher.app_cipher({"SECRET_KEY": "k", "SOCIAL_OAUTH2_TOKEN_KEYS": None})
    claims = apple_secret.SecretClaims("TEAM", "KEY", "com.example", "https://appleid.apple.com")
    secret = apple_secret.SECRETS.secret(claims, pem)
    assert apple_secret.SECRETS.secret(claims, pem) == secret
    assert len(fetches) == 1  # the second read came from the cache
    assert len(dpop.nonces) == 1
    assert len(dpop.loaded_keys) == 1
    assert client_auth.load_signing_key.cache_info().currsize == 1
    assert cipher.app_cipher({"SECRET_KEY": "k", "SOCIAL_OAUTH2_TOKEN_KEYS": None}) is first

    caches.clear_caches()

    cached_document(fetches)
    assert len(fetches) == 2  # fetched again
    assert len(dpop.nonces) == 0
    assert len(dpop.loaded_keys) == 0
    assert client_auth.load_signing_key.cache_info().currsize == 0
    assert cipher.app_cipher({"SECRET_KEY": "k", "SOCIAL_OAUTH2_TOKEN_KEYS": None}) is not first
    assert apple_secret.SECRETS.secret(claims, pem) != secret  # made again (ES256 is randomized)


def test_a_registered_cache_is_cleared_once_per_call() -> None:
    calls: list[int] = []
    caches.register("test cache", lambda: calls.append(1))
    try:
        caches.clear_caches()
        assert calls == [1]
    finally:
        caches.register("test cache", lambda: None)
