"""What the local identity provider saw, and what it was told to answer next: the parts a
test reads and sets."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, get_args

from authlib.oauth2.base import invalid_error_characters

from .models import TokenFailure

__all__ = ["NextAnswers", "RecordedTokenRequest", "Records"]

#: Token-request fields whose values :class:`RecordedTokenRequest` never prints.
_SENSITIVE_FIELDS: Final = frozenset(
    {"client_secret", "code", "code_verifier", "refresh_token", "client_assertion", "token"}
)


@dataclass(frozen=True, repr=False)
class RecordedTokenRequest:
    """One request received by the token endpoint.

    Its ``repr`` names the fields and the status but never prints a secret, a
    code, a verifier or a token.

    :param form: the form fields, first value of each.
    :param form_multi: every form field with all its values, in order.
    :param headers: the request headers (Werkzeug's Title-Case names).
    :param status_code: the HTTP status the provider answered with.
    :param query: the query string parameters, if any were sent.
    """

    form: dict[str, str]
    form_multi: dict[str, list[str]]
    headers: dict[str, str]
    status_code: int
    query: dict[str, str] = field(default_factory=dict)

    @property
    def grant_type(self) -> str | None:
        """The ``grant_type`` form field."""
        return self.form.get("grant_type")

    @property
    def auth_method(self) -> str:
        """How the client authenticated: ``client_secret_basic``,
        ``client_secret_post``, ``both`` or ``none``."""
        basic = self.header("Authorization", "").lower().startswith("basic ")
        post = "client_secret" in self.form
        if basic and post:
            return "both"
        if basic:
            return "client_secret_basic"
        if post:
            return "client_secret_post"
        return "none"

    def header(self, name: str, default: str = "") -> str:
        """Return a request header by case-insensitive name."""
        lowered = name.lower()
        for key, value in self.headers.items():
            if key.lower() == lowered:
                return value
        return default

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{key}={'<redacted>' if key in _SENSITIVE_FIELDS else repr(value)}"
            for key, value in self.form.items()
        )
        return (
            f"RecordedTokenRequest(status_code={self.status_code}, "
            f"auth_method={self.auth_method!r}, form={{{fields}}})"
        )


class Records:
    """The requests the provider received, for a test to read (copies, under a lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._authorization: list[dict[str, str]] = []
        self._token: list[RecordedTokenRequest] = []
        self._userinfo: list[dict[str, str]] = []
        self._revocation: list[RecordedTokenRequest] = []
        self._api: list[dict[str, str]] = []
        self._logout: list[dict[str, str]] = []
        self._documents: dict[str, int] = {"jwks": 0, "discovery": 0}

    def add_authorization(self, query: Mapping[str, str]) -> None:
        """Record the query of a ``GET /authorize``."""
        with self._lock:
            self._authorization.append(dict(query))

    def add_token(self, record: RecordedTokenRequest) -> None:
        """Record a token request."""
        with self._lock:
            self._token.append(record)

    def add_revocation(self, record: RecordedTokenRequest) -> None:
        """Record a revocation request (RFC 7009)."""
        with self._lock:
            self._revocation.append(record)

    def add_logout(self, query: Mapping[str, str]) -> None:
        """Record the query of an RP-initiated logout request."""
        with self._lock:
            self._logout.append(dict(query))

    def add_api(self, headers: Mapping[str, str]) -> None:
        """Record the headers of a request to the protected API."""
        with self._lock:
            self._api.append(dict(headers))

    def add_userinfo(self, headers: Mapping[str, str]) -> None:
        """Record the headers of a userinfo request."""
        with self._lock:
            self._userinfo.append(dict(headers))

    def count_document(self, name: str) -> None:
        """Count a fetch of the ``"jwks"`` or the ``"discovery"`` document."""
        with self._lock:
            self._documents[name] += 1

    def authorization(self) -> list[dict[str, str]]:
        """A copy of the recorded authorization queries."""
        with self._lock:
            return [dict(entry) for entry in self._authorization]

    def token(self) -> list[RecordedTokenRequest]:
        """A copy of the recorded token requests."""
        with self._lock:
            return list(self._token)

    def revocation(self) -> list[RecordedTokenRequest]:
        """A copy of the recorded revocation requests."""
        with self._lock:
            return list(self._revocation)

    def logout(self) -> list[dict[str, str]]:
        """A copy of the recorded logout queries."""
        with self._lock:
            return [dict(entry) for entry in self._logout]

    def api(self) -> list[dict[str, str]]:
        """A copy of the headers of the recorded API requests."""
        with self._lock:
            return [dict(entry) for entry in self._api]

    def userinfo(self) -> list[dict[str, str]]:
        """A copy of the recorded userinfo headers."""
        with self._lock:
            return [dict(entry) for entry in self._userinfo]

    def documents(self, name: str) -> int:
        """How often the ``"jwks"`` or the ``"discovery"`` document was fetched."""
        with self._lock:
            return self._documents[name]

    def clear(self) -> None:
        """Forget every record."""
        with self._lock:
            self._documents.update(jwks=0, discovery=0)
            self._authorization.clear()
            self._token.clear()
            self._userinfo.clear()
            self._revocation.clear()
            self._api.clear()
            self._logout.clear()


class NextAnswers:
    """Faults a test asks for: the next authorization refused, the next token request
    failed. Each is used once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._denial: tuple[str, str | None] | None = None
        self._token_failure: TokenFailure | None = None

    def deny(self, error: str, description: str | None) -> None:
        """Refuse the next valid authorization request with ``error``.

        :raises ValueError: if either holds characters RFC 6749 forbids there.
        """
        for text in (error, description or ""):
            if invalid_error_characters(text):
                raise ValueError('error and description must be printable ASCII without " or \\.')
        if not error:
            raise ValueError("error must not be empty.")
        with self._lock:
            self._denial = (error, description)

    def fail_token(self, kind: TokenFailure | str) -> None:
        """Fail the next token request this way.

        :raises ValueError: for an unknown kind.
        """
        if kind not in get_args(TokenFailure):
            raise ValueError(f"kind must be one of {get_args(TokenFailure)}, not {kind!r}.")
        with self._lock:
            self._token_failure = kind  # type: ignore[assignment]

    def take_denial(self) -> tuple[str, str | None] | None:
        """The denial asked for, once."""
        with self._lock:
            denial, self._denial = self._denial, None
        return denial

    def take_token_failure(self) -> TokenFailure | None:
        """The token failure asked for, once."""
        with self._lock:
            failure, self._token_failure = self._token_failure, None
        return failure
