"""Home realm discovery: which provider signs in a work e-mail address, by its domain.

A block names the domains of its people in ``customProperties.domains`` (space-separated);
:func:`domain_of` reads the domain of an address the way those are read, so that the two meet.
A domain matches itself only: ``acme.com`` does not send ``eu.acme.com`` to the same provider,
since a subdomain is often run by someone else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from ..errors import ConfigurationProblem
from .settings import OAuth2Settings

__all__ = ["DOMAINS_KEY", "domain_of", "domains_by_block", "normalized_domain"]

#: The ``customProperties`` key naming a block's e-mail domains.
DOMAINS_KEY: Final = "domains"
_KEY: Final = f"customProperties.{DOMAINS_KEY}"

_LABEL: Final = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_MAX_ADDRESS: Final = 254  # RFC 5321's limit on a path, the longest address a mail server takes


def normalized_domain(domain: str) -> str:
    """``domain`` lower-cased, without a final dot, internationalized names in their ASCII
    (punycode) form.

    :raises ValueError: when it is not a domain name.
    """
    text = domain.strip().rstrip(".").lower()
    try:
        ascii_form = text.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{domain!r} is not a domain name") from None
    labels = ascii_form.split(".")
    if not ascii_form or len(ascii_form) > 253 or not all(_LABEL.fullmatch(x) for x in labels):
        raise ValueError(f"{domain!r} is not a domain name")
    return ascii_form


def domain_of(address: str) -> str:
    """The normalized domain of the e-mail ``address`` (the part after its last ``@``).

    :raises ValueError: when ``address`` is not an e-mail address; the message does not
        repeat it.
    """
    if not isinstance(address, str):
        raise ValueError("an e-mail address must be a string")
    text = address.strip()
    local, at, domain = text.rpartition("@")
    if not at or not local or not domain:
        raise ValueError("not an e-mail address: it needs a name, '@' and a domain")
    if len(text) > _MAX_ADDRESS or any(c.isspace() or ord(c) < 32 for c in text):
        raise ValueError("not an e-mail address: too long or holds spaces")
    try:
        return normalized_domain(domain)
    except ValueError:
        raise ValueError("not an e-mail address: its domain is not a domain name") from None


def domains_by_block(
    blocks: Mapping[str, OAuth2Settings],
) -> tuple[dict[str, str], list[ConfigurationProblem]]:
    """Every block's ``customProperties.domains``, as domain -> block name.

    :return: The map, and every problem: a name that is not a domain, or a domain two blocks
        claim.
    """
    owners: dict[str, str] = {}
    problems: list[ConfigurationProblem] = []
    for name, settings in blocks.items():
        value = settings.custom_properties.get(DOMAINS_KEY)
        if value is None:
            continue
        for domain in _split(value, name, problems):
            owner = owners.setdefault(domain, name)
            if owner != name:
                problems.append(
                    ConfigurationProblem(name, _KEY, f"{domain} is already a domain of {owner!r}")
                )
    return owners, problems


def _split(value: object, name: str, problems: list[ConfigurationProblem]) -> Iterable[str]:
    if not isinstance(value, str) or not value.split():
        message = "must be space-separated domain names, e.g. 'acme.com example.org'"
        problems.append(ConfigurationProblem(name, _KEY, message))
        return []
    found = []
    for item in value.split():
        try:
            found.append(normalized_domain(item))
        except ValueError as error:
            problems.append(ConfigurationProblem(name, _KEY, str(error)))
    return found
