"""The public documents the extension serves for providers to fetch: the JWK set of a block
that signs its client authentication with a private key, and a published client's metadata
document (Bluesky). Registered by ``init_app``; imported with it, not with the extension."""

from __future__ import annotations

from typing import Any, Final

from flask import abort, jsonify
from flask.typing import ResponseReturnValue

from ..config.provider_options import ProviderOptions
from ..config.settings import OAuth2Settings
from ..oauth import client_auth
from ..providers.oauth2 import OAuth2Provider
from ..runtime import current_runtime
from ..web.logout import logout_route_url, registered_logout_urls

#: ``Cache-Control`` of the public documents served for providers to fetch (JWK set, client
#: metadata): shared caches may keep them five minutes, so a changed key or redirect URI is
#: seen soon (the provider may keep its own copy longer).
SERVED_DOCUMENT_CACHE: Final = "public, max-age=300"


def _logout_metadata(
    name: str, settings: OAuth2Settings, options: ProviderOptions
) -> dict[str, Any]:
    """The client metadata of the sign-out routes a block turns on (OpenID Connect
    Back-Channel and Front-Channel Logout 1.0)."""
    urls = {
        field: logout_route_url(name, settings.redirect_url, path)
        for field, path in registered_logout_urls(options).items()
    }
    document: dict[str, Any] = {}
    if "backchannel_logout_uri" in urls:
        document["backchannel_logout_uri"] = urls["backchannel_logout_uri"]
        document["backchannel_logout_session_required"] = True
    if "frontchannel_logout_uri" in urls:
        document["frontchannel_logout_uri"] = urls["frontchannel_logout_uri"]
        document["frontchannel_logout_session_required"] = True
    return document


def jwks_view(provider: str) -> ResponseReturnValue:
    """``GET <url rule>/jwks.json``: the public JWK set of a block that signs its client
    authentication with a private key, for the provider to fetch; 404 for any other."""
    selected = current_runtime().find_provider(provider)
    if selected is None:
        abort(404)
    # a provider of another kind than OAuth2Provider has its block parsed here
    options = selected.options if isinstance(selected, OAuth2Provider) else None
    jwks = client_auth.public_jwks(selected.settings, options)
    if jwks is None:
        abort(404)
    response = jsonify(jwks)
    response.headers["Cache-Control"] = SERVED_DOCUMENT_CACHE
    return response


def client_metadata_view(provider: str) -> ResponseReturnValue:
    """``GET <url rule>/client-metadata.json``: the client metadata document of a block whose
    provider fetches one from its client ID (Bluesky's published client); 404 for any other."""
    selected = current_runtime().find_provider(provider)
    if not isinstance(selected, OAuth2Provider):
        abort(404)
    document = selected.client_metadata()
    if document is None:
        abort(404)
    response = jsonify(
        {**document, **_logout_metadata(selected.name, selected.settings, selected.options)}
    )
    response.headers["Cache-Control"] = SERVED_DOCUMENT_CACHE
    return response
