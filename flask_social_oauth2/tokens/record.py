"""What a token store keeps of an :class:`~flask_social_oauth2.OAuth2Info`: what calling the
API and refreshing need, and, for a store that asks for it (the SQL store), the ID token, which
RP-initiated logout sends back to the provider as ``id_token_hint``. The session store never
keeps the ID token (the session cookie has no room for it).

Besides the tokens, a provider may need short string fields of its token answer for later
calls (Salesforce's ``instance_url``, Zoho's ``accounts-server`` and ``api_domain``): those are
kept; structured fields (a profile inside the answer) and any other token are not."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Final

from ..config.settings import OAuth2Info

#: The version of the record's layout, kept inside every record.
RECORD_VERSION: Final = 1
#: The longest token-answer field kept besides the tokens.
MAX_PARAM_LENGTH: Final = 1024
#: ``json.dumps(..., separators=(",", ":"))`` without a new encoder per record (it keeps no
#: state between calls).
COMPACT_JSON: Final = json.JSONEncoder(separators=(",", ":"))


def with_expiry(info: OAuth2Info, now: float | None = None) -> OAuth2Info:
    """``info`` with ``expires_at`` set from ``expires_in`` (counted from ``now``) when only
    the latter is known. Called when a fresh token answer is saved."""
    if info.expires_at is not None or info.expires_in is None:
        return info
    now = time.time() if now is None else now
    return dataclasses.replace(info, expires_at=now + info.expires_in)


def scope_of(info: OAuth2Info) -> str | None:
    """The granted scope, when the token answer named one."""
    scope = info.params.get("scope")
    return scope if isinstance(scope, str) else None


def dump_record(
    info: OAuth2Info, now: float | None = None, *, keep_id_token: bool = False
) -> bytes:
    """The JSON bytes kept (encrypted) for ``info``, as for :func:`with_expiry`'s result: an
    ``expires_at`` not set yet is reckoned from ``expires_in`` and ``now`` (default: the time).
    With ``keep_id_token``, the ID token of the answer (``params["id_token"]``) is kept too."""
    expires_at = info.expires_at
    if expires_at is None and info.expires_in is not None:
        expires_at = (time.time() if now is None else now) + info.expires_in
    record: dict[str, Any] = {
        "v": RECORD_VERSION,
        "access_token": info.access_token,
        "token_type": info.token_type,
        "refresh_token": info.refresh_token,
        "expires_in": info.expires_in,
        "expires_at": expires_at,
        "params": kept_params(info),
    }
    if info.dpop_key is not None:  # the key the tokens are bound to (DPoP): kept with them
        record["dpop_key"] = info.dpop_key
    id_token = info.params.get("id_token")
    if keep_id_token and isinstance(id_token, str) and id_token:
        record["id_token"] = id_token
    return COMPACT_JSON.encode(record).encode()


def load_record(data: bytes) -> OAuth2Info:
    """The :class:`OAuth2Info` kept in ``data``.

    :raises ValueError: when ``data`` is not a record this version wrote.
    """
    record = json.loads(data)
    if not isinstance(record, dict) or record.get("v") != RECORD_VERSION:
        raise ValueError("not a token record")
    access_token = record.get("access_token")
    if not isinstance(access_token, str) or not access_token:
        raise ValueError("token record without an access token")
    token_type = _optional(record, "token_type", str)
    refresh_token = _optional(record, "refresh_token", str)
    expires_in = _optional(record, "expires_in", int)
    expires_at = _optional(record, "expires_at", float)
    params = _optional(record, "params", dict) or {}
    dpop_key = _optional(record, "dpop_key", str)
    if not all(isinstance(value, str) for value in params.values()):
        raise ValueError("token record field 'params' has the wrong type")
    id_token = _optional(record, "id_token", str)
    if id_token is not None:
        params = {**params, "id_token": id_token}
    return OAuth2Info(
        access_token=access_token,
        token_type=token_type,
        expires_in=expires_in,
        refresh_token=refresh_token,
        params=params,
        expires_at=expires_at,
        dpop_key=dpop_key,
    )


def kept_params(info: OAuth2Info) -> dict[str, str]:
    """The fields of the token answer kept with the tokens: short strings, no token."""
    return {
        name: value
        for name, value in info.params.items()
        if isinstance(value, str)
        and len(value) <= MAX_PARAM_LENGTH
        and name != "id_token"
        and not name.endswith("_token")
    }


def _optional(record: dict[str, Any], name: str, kind: type) -> Any:
    value = record.get(name)
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ValueError(f"token record field {name!r} has the wrong type")
    return value
