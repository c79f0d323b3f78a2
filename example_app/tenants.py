"""Two customers that sign in through their own identity provider, loaded at runtime: what a
B2B app keeps in its database, here a table made from the two local identity providers that
``python -m example_app`` starts (``acme`` on the first, ``globex`` on the second).

The extension asks :func:`customer_provider` for a provider name it does not know, and
:func:`customer_for_domain` for the domain of an address typed into the ready sign-in page's
"Sign in with your work e-mail" form (``ana@acme.test`` signs in at Acme's provider).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from flask_social_oauth2 import SocialOAuth2, SocialProvider

__all__ = ["CUSTOMERS", "Customer", "customers_from", "install"]


@dataclass(frozen=True)
class Customer:
    """One customer: its provider name, its e-mail domain and the variables of its identity
    provider (``<prefix>_URL``, ``<prefix>_CLIENT_SECRET``)."""

    name: str
    domain: str
    prefix: str


#: The example's customers.
CUSTOMERS: Final = (
    Customer("acme", "acme.test", "LOCAL_IDP"),
    Customer("globex", "globex.test", "LOCAL_IDP2"),
)


def customers_from(variables: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Each customer's block, for those whose identity provider runs (its variables set)."""
    blocks = {}
    for customer in CUSTOMERS:
        url = variables.get(f"{customer.prefix}_URL")
        secret = variables.get(f"{customer.prefix}_CLIENT_SECRET")
        if url and secret:
            blocks[customer.name] = {
                "authorizationURL": f"{url}/authorize",
                "accessTokenURL": f"{url}/token",
                "apiURL": f"{url}/userinfo",
                "redirectURL": f"/authenticate/{customer.name}",
                "clientID": "example-app",
                "clientSecret": secret,
                "scope": "openid profile email",
                "customProperties": {"apiBaseURL": f"{url}/api/"},
            }
    return blocks


def install(social: SocialOAuth2, variables: Mapping[str, str]) -> None:
    """Register the loaders that find the customers' providers and their e-mail domains."""
    blocks = customers_from(variables)
    domains = {c.domain: c.name for c in CUSTOMERS if c.name in blocks}

    @social.provider_loader
    def customer_provider(name: str) -> SocialProvider | None:
        block = blocks.get(name)  # a real app reads its table of customers here
        return None if block is None else social.build_provider(name, block)

    @social.domain_loader
    def customer_for_domain(domain: str) -> str | None:
        return domains.get(domain)
