"""A provider's answer as the flow reads it: status, content type, headers and the whole body.

Kept apart from :mod:`flask_social_oauth2.oauth.http_client`, which needs ``requests``, so that the
modules that only read answers import nothing of the HTTP stack until a request is sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, repr=False)
class ProviderResponse:
    """A provider's answer, read whole within the size cap. ``repr`` shows the body's size and
    the header names, never their values."""

    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        """The body read as JSON.

        :raises ValueError: when it is not JSON, including JSON nested too deeply to read
            (``json`` raises :class:`RecursionError` for that, which must not become a 500).
        """
        try:
            return json.loads(self.body)
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None

    @property
    def media_type(self) -> str:
        """The content type without parameters, lower case."""
        return self.content_type.split(";", 1)[0].strip().lower()

    def __repr__(self) -> str:
        # The body of a token answer holds tokens; header values may too (e.g. a cookie).
        return (
            f"ProviderResponse(status={self.status!r}, content_type={self.content_type!r}, "
            f"body=<{len(self.body)} bytes>, headers=<{', '.join(self.headers)}>)"
        )

    __str__ = __repr__
