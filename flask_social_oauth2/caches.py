"""Every process-wide cache of the package, by name, and one way to empty them all.

Shared by every app and provider of the process where sharing is right (a provider's public
documents, keys parsed from PEM text); each holds only what it can fetch or compute again:

- ``discovery documents``: OpenID / RFC 8414 metadata, and what went wrong fetching it
  (:mod:`flask_social_oauth2.oidc.discovery`);
- ``key sets``: providers' JWK sets for ID token checks (same module);
- ``DPoP nonces``: the last nonce of each server, and ``DPoP keys``: keys loaded from their export
  (:mod:`flask_social_oauth2.oauth.dpop`);
- ``client assertion keys``: private keys parsed from a block's PEM
  (:mod:`flask_social_oauth2.oauth.client_auth`);
- ``Apple client secrets``: the ES256 client-secret JWTs, until near expiry;
- ``token ciphers``: the ciphers of each app's token keys.

Each cache is made by the module that uses it and registers here as it is made, so that this
module, at the bottom of the package, imports none of them; a cache whose module was never
imported is empty anyway.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["clear_caches", "register", "registered"]

_clears: dict[str, Callable[[], None]] = {}
_lock = threading.Lock()


def register(name: str, clear: Callable[[], None]) -> None:
    """Name a process-wide cache and the function that empties it (called by the module that
    makes the cache, at import; registering a name again replaces its function)."""
    with _lock:
        _clears[name] = clear


def registered() -> tuple[str, ...]:
    """The names of the caches registered so far, in the order they were."""
    with _lock:
        return tuple(_clears)


def clear_caches() -> None:
    """Forget everything every process-wide cache holds (e.g. between tests, or after a
    provider rotated its keys and you do not want to wait for the cache's lifetime): the next
    use fetches or computes it again."""
    with _lock:
        clears = list(_clears.values())
    for clear in clears:
        clear()
