"""The DNS method of AT Protocol handle resolution: the TXT record ``_atproto.<handle>`` that
holds ``did=<DID>`` (https://atproto.com/specs/handle), looked up with dnspython.

The answer is only the handle's claim, as with the HTTPS method: the DID's document must name
the handle back (:func:`~.identity.verify_handle`). A lookup connects to a DNS server only,
never to an address the answer names, so it needs no SSRF guard of its own.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ..errors import ResolutionError

if TYPE_CHECKING:
    import dns.resolver

#: A TXT lookup: the texts of a name's TXT records (none when the name has none).
TxtLookup = Callable[[str], list[str]]

#: Seconds a whole lookup may take, retries included.
DEFAULT_DNS_TIMEOUT: Final = 3.0
_PREFIX: Final = "did="


@dataclass(frozen=True)
class DnsTxtLookup:
    """TXT records through the system's DNS resolvers, or through one ``nameserver``.

    :param nameserver: An IP address, optionally with a port (``"127.0.0.1:5353"``,
        ``"[::1]:53"``); default: the resolvers of ``/etc/resolv.conf``.
    :param timeout: Seconds the whole lookup may take.
    """

    nameserver: str | None = None
    timeout: float = DEFAULT_DNS_TIMEOUT

    def __post_init__(self) -> None:
        if self.nameserver is not None:
            parse_nameserver(self.nameserver)

    def __call__(self, name: str) -> list[str]:
        """The texts of ``name``'s TXT records, each record's strings joined.

        :raises ResolutionError: ``"timeout"`` (504) or ``"dns_failed"`` (502).
        """
        import dns.exception
        import dns.resolver

        try:
            resolver = self._resolver()
            answer = resolver.resolve(name, "TXT", lifetime=self.timeout, search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        except dns.exception.Timeout:
            raise ResolutionError(
                "timeout", f"DNS did not answer for {name!r} in time", status_code=504
            ) from None
        except dns.exception.DNSException as failure:
            raise ResolutionError(
                "dns_failed", f"DNS lookup of {name!r} failed: {type(failure).__name__}"
            ) from None
        return [b"".join(record.strings).decode("utf-8", "replace") for record in answer]

    def _resolver(self) -> dns.resolver.Resolver:
        import dns.resolver

        if self.nameserver is None:
            return dns.resolver.Resolver()
        address, port = parse_nameserver(self.nameserver)
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = [address]
        resolver.port = port
        return resolver


def parse_nameserver(value: str) -> tuple[str, int]:
    """``"host[:port]"`` as an IP address and a port (default 53).

    :raises ValueError: naming what is wrong.
    """
    text, port_text = value, ""
    if value.startswith("["):
        text, _, rest = value[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError("must be an IP address, optionally with :port")
        port_text = rest[1:]
    elif value.count(":") == 1:
        text, _, port_text = value.partition(":")
    try:
        address = str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError("must be an IP address, optionally with :port") from None
    if not port_text:
        return address, 53
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError("has a port that is not 1-65535")
    return address, int(port_text)


def did_from_txt(handle: str, texts: list[str]) -> str | None:
    """The DID claimed by the ``did=`` texts of ``_atproto.<handle>``, or ``None`` when there
    is none.

    :raises ResolutionError: ``"ambiguous_dns"`` when the records claim different DIDs (the
        spec says resolution then fails).
    """
    claims = {text[len(_PREFIX) :].strip() for text in texts if text.startswith(_PREFIX)}
    if len(claims) > 1:
        raise ResolutionError(
            "ambiguous_dns", f"the TXT records of {handle!r} claim {len(claims)} DIDs"
        )
    return claims.pop() if claims else None
