"""Which IP addresses a resolution fetch may connect to.

A handle, a DID document or a PDS names hosts that anyone can choose, so every address a fetch
would connect to must be a public unicast one: never this machine, a private or carrier-grade NAT
network, a link-local or multicast address, a reserved or documentation range. An IPv6 address
that embeds an IPv4 one (IPv4-mapped, IPv4-compatible, 6to4, Teredo, NAT64) is judged by the
address it carries, so that ``::ffff:127.0.0.1`` is loopback.
"""

from __future__ import annotations

import ipaddress
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Ranges that ``is_global`` has let through in some Python version, or that hold another
#: address: refused whatever the ``ipaddress`` module of the day says.
_REFUSED_V4: Final = tuple(
    ipaddress.IPv4Network(network)
    for network in (
        "0.0.0.0/8",  # "this network"
        "100.64.0.0/10",  # carrier-grade NAT (RFC 6598)
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "240.0.0.0/4",  # reserved, and the broadcast address
    )
)
_NAT64: Final = (
    ipaddress.IPv6Network("64:ff9b::/96"),  # well-known NAT64 prefix (RFC 6052)
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # local-use NAT64 prefix (RFC 8215)
)
_IPV4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for or carries, if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    # "::" and "::1" sit in the deprecated IPv4-compatible range but are not such addresses.
    compatible = address in _IPV4_COMPATIBLE and int(address) > 1
    if compatible or any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_loopback_address(address: IPAddress) -> bool:
    """Whether ``address`` is this machine's loopback (``127.0.0.0/8``, ``::1``, or an IPv6
    spelling of an IPv4 loopback address)."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            return inner.is_loopback
    return address.is_loopback


def is_public_address(address: IPAddress) -> bool:
    """Whether ``address`` is a public unicast address a resolution fetch may connect to."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            return is_public_address(inner)
        if address.scope_id:
            return False
    if isinstance(address, ipaddress.IPv4Address) and any(
        address in network for network in _REFUSED_V4
    ):
        return False
    return address.is_global and not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or (isinstance(address, ipaddress.IPv6Address) and address.is_site_local)
    )
