"""``WWW-Authenticate`` (RFC 9110 11.6.1): the challenges of a header value, parsed.

A resource server asks for a DPoP nonce with a challenge (RFC 9449 9); :func:`challenges` reads
them without any HTTP client's help, and never raises.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["challenges"]

_TCHARS: Final = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED: Final = r'"(?:[^"\\]|\\.)*"'
#: An auth-param: token BWS "=" BWS ( token / quoted-string ) (RFC 9110 11.2).
_PARAM: Final = re.compile(rf"({_TCHARS})[ \t]*=[ \t]*(?:({_TCHARS})|({_QUOTED}))")
#: A token68 after a scheme, when the challenge's only other content (RFC 9110 11.2).
_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*(?=[ \t]*(?:,|$))")
_SCHEME: Final = re.compile(_TCHARS)
_SEPARATORS: Final = re.compile(r"[ \t,]*")
_SPACES: Final = re.compile(r"[ \t]*")
_ESCAPE: Final = re.compile(r"\\(.)")


def _skip(pattern: re.Pattern[str], value: str, position: int) -> int:
    """The position after what ``pattern`` (which matches the empty string) matches there."""
    skipped = pattern.match(value, position)
    return position if skipped is None else skipped.end()


def challenges(value: str) -> list[tuple[str, dict[str, str]]]:
    """The challenges of a ``WWW-Authenticate`` value (RFC 9110 11.6.1): ``(scheme, params)``
    pairs, the scheme and parameter names in lower case, quoted values unquoted. Parsing stops
    at the first thing that is not a challenge; what came before it is kept."""
    found: list[tuple[str, dict[str, str]]] = []
    position = 0
    while True:
        position = _skip(_SEPARATORS, value, position)
        scheme = _SCHEME.match(value, position)
        if scheme is None:
            return found
        params: dict[str, str] = {}
        found.append((scheme.group().lower(), params))
        position = _skip(_SPACES, value, scheme.end())
        if position == scheme.end() and position < len(value) and value[position] != ",":
            return found  # a scheme runs straight into something else
        token68 = _TOKEN68.match(value, position)
        if token68 is not None and _PARAM.match(value, position) is None:
            position = token68.end()
            continue
        while (param := _PARAM.match(value, position)) is not None:
            name, token, quoted = param.groups()
            text = token if token is not None else _ESCAPE.sub(r"\1", quoted[1:-1])
            params.setdefault(name.lower(), text)
            position = _skip(_SPACES, value, param.end())
            if position < len(value) and value[position] != ",":
                return found
            position = _skip(_SEPARATORS, value, position)
