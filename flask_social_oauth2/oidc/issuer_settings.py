"""A provider's settings record from its issuer's discovery document: what
``social.discover_settings(issuer, ...)`` and ``flask social discover ISSUER`` give.

An admin page that asks a customer for "issuer, client ID, client secret" needs nothing else:
the authorization and token addresses, and the userinfo address where the provider has one,
come from the discovery document, read through :mod:`.discovery` (its cache, and the
:class:`~.discovery.Source` the caller hands in, which sends the request with the app's
timeout and size cap). Nothing here knows about Flask.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

from ..config.settings import OAuth2Settings
from ..errors import ConfigurationError, ConfigurationProblem, DiscoveryError
from . import discovery

#: The scope of a discovered block unless the caller names another.
DEFAULT_SCOPE: Final = "openid email profile"


def source_name(issuer: str) -> str:
    """The name errors and logs use for an issuer that is no provider yet: its host."""
    try:
        return urlsplit(issuer).hostname or "issuer"
    except ValueError:
        return "issuer"


def settings_from_issuer(
    source: discovery.Source,
    issuer: str,
    *,
    client_id: str,
    client_secret: str,
    redirect_url: str,
    scope: str = DEFAULT_SCOPE,
    custom_properties: Mapping[str, str] | None = None,
) -> OAuth2Settings:
    """The settings record of a provider block for ``issuer``, from its discovery document.

    ``authorizationURL`` and ``accessTokenURL`` are the document's ``authorization_endpoint``
    and ``token_endpoint``, ``apiURL`` its ``userinfo_endpoint`` where it has one, and
    ``customProperties.issuer`` is ``issuer``. The document is kept in the process's discovery
    cache, so that the provider built from the record reads it from there.

    :param source: The name errors use and how the document is fetched.
    :param issuer: The issuer identifier, exactly as the document writes it (mind a trailing
        ``/``): https, or http on a loopback host; no query. A multi-tenant document whose
        issuer holds ``{tenantid}`` is found from the issuer of one of its tenant segments
        (``https://login.microsoftonline.com/common/v2.0``).
    :param custom_properties: More ``customProperties`` (e.g. ``allowedTenants``); ``issuer``
        is always the one given.
    :raises ConfigurationError: when ``issuer`` is not an issuer identifier, or a value given
        does not make a valid block; every problem listed.
    :raises DiscoveryError: when the document cannot be fetched (502, 504 for a timeout), is
        not a discovery document (not a JSON object, no ``issuer``, no ``authorization_endpoint``
        or ``token_endpoint``, no ``jwks_uri`` for an ``openid`` scope, an address that is not
        https), or names another issuer.
    """
    name = source.provider
    problem = discovery.issuer_problem(issuer) if isinstance(issuer, str) else "must be a string"
    if problem is not None:
        raise ConfigurationError([ConfigurationProblem(name, "issuer", problem)])
    metadata = discovery.issuer_metadata(source, issuer)
    wanted = {
        "authorization_endpoint": metadata.authorization_endpoint,
        "token_endpoint": metadata.token_endpoint,
    }
    if "openid" in str(scope).split():
        wanted["jwks_uri"] = metadata.jwks_uri
    missing = [key for key, value in wanted.items() if value is None]
    if missing:
        raise DiscoveryError(
            name,
            f"discovery document has no {' and no '.join(missing)}: it cannot serve a sign-in",
        )
    block = {
        "authorizationURL": metadata.authorization_endpoint,
        "accessTokenURL": metadata.token_endpoint,
        "redirectURL": redirect_url,
        "apiURL": metadata.userinfo_endpoint,
        "clientID": client_id,
        "clientSecret": client_secret,
        "scope": scope,
        "customProperties": {**(custom_properties or {}), "issuer": issuer},
    }
    return OAuth2Settings.from_config(block, provider=name)
