"""Coverage-guided fuzz targets (atheris / libFuzzer), run by tests/test_fuzz_targets.py.

Usage::

    python tests/fuzz_targets.py state_cookie -runs=20000 -seed=1
    python tests/fuzz_targets.py next_path -runs=20000 -seed=1

``state_cookie`` feeds :func:`flask_social_oauth2.web.state_cookie.decode` random bytes as the
cookie value, and structured variations of validly signed payloads (any JSON shapes, entries of
the right length with wrong types, fallback and foreign keys, odd clocks and TTLs, tampering).
The decoder must never raise, and must give only well-formed, unexpired flows.

``next_path`` feeds :func:`flask_social_oauth2.web.redirects.safe_next_path` any text: the answer is
``None`` or the input itself, a path with one leading ``/``, no backslash, no control, space or
non-ASCII character, with no scheme and no host, that keeps the app's host when resolved.

The package's modules are instrumented (``atheris.instrument_imports``) so that libFuzzer steers
by their branch coverage.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

import atheris

with atheris.instrument_imports(include=["flask_social_oauth2"]):
    from flask_social_oauth2.web import redirects, state_cookie

KEY = "fuzz-secret-key"
OLD_KEY = "fuzz-old-secret-key"
SERIALIZER = state_cookie.make_serializer(KEY, [OLD_KEY])
FOREIGN = state_cookie.make_serializer("someone-elses-key")
OLD_ONLY = state_cookie.make_serializer(OLD_KEY)
NOW = 1_800_000_000


def _value(data: atheris.FuzzedDataProvider, depth: int = 0) -> Any:
    """Any JSON value, shaped by the input."""
    kind = data.ConsumeIntInRange(0, 7 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return data.ConsumeBool()
    if kind == 2:
        return data.ConsumeInt(8)
    if kind == 3:
        return data.ConsumeRegularFloat()
    if kind in (4, 5):
        return data.ConsumeUnicodeNoSurrogates(data.ConsumeIntInRange(0, 40))
    if kind == 6:
        return [_value(data, depth + 1) for _ in range(data.ConsumeIntInRange(0, 8))]
    return {
        data.ConsumeUnicodeNoSurrogates(8): _value(data, depth + 1)
        for _ in range(data.ConsumeIntInRange(0, 4))
    }


def _entry(data: atheris.FuzzedDataProvider) -> Any:
    """A cookie entry: mostly of the right length, each field right or wrong."""
    if data.ConsumeIntInRange(0, 4) == 0:
        return _value(data)
    right: list[Callable[[], Any]] = [
        lambda: data.ConsumeUnicodeNoSurrogates(32),  # state
        lambda: data.ConsumeUnicodeNoSurrogates(10),  # provider
        lambda: data.ConsumeUnicodeNoSurrogates(40),  # redirect_uri
        lambda: data.ConsumeUnicodeNoSurrogates(43) if data.ConsumeBool() else None,
        lambda: data.ConsumeUnicodeNoSurrogates(20) if data.ConsumeBool() else None,
        lambda: NOW + data.ConsumeIntInRange(-1000, 1000),  # created
        lambda: data.ConsumeUnicodeNoSurrogates(22) if data.ConsumeBool() else None,
    ]
    length = 7 if data.ConsumeIntInRange(0, 3) else data.ConsumeIntInRange(0, 9)
    return [
        right[index % 7]() if data.ConsumeIntInRange(0, 5) else _value(data)
        for index in range(length)
    ]


def check_flows(flows: Any, ttl: int, now: int) -> None:
    assert isinstance(flows, list)
    assert len(flows) <= state_cookie.MAX_PENDING_FLOWS
    for flow in flows:
        assert isinstance(flow, state_cookie.PendingFlow)
        assert isinstance(flow.state, str)
        assert isinstance(flow.provider, str)
        assert isinstance(flow.redirect_uri, str)
        assert isinstance(flow.created, int)
        assert not isinstance(flow.created, bool)
        assert now - ttl <= flow.created <= now + 60
        for optional in (flow.verifier, flow.next_url, flow.nonce):
            assert optional is None or isinstance(optional, str)


def fuzz_state_cookie(raw: bytes) -> None:
    data = atheris.FuzzedDataProvider(raw)
    ttl = data.ConsumeIntInRange(1, 10_000)
    mode = data.ConsumeIntInRange(0, 5)
    if mode == 0:  # any bytes as the cookie value
        value = data.ConsumeBytes(data.remaining_bytes()).decode("latin-1")
    elif mode == 1:  # any text
        value = data.ConsumeUnicode(data.remaining_bytes())
    else:
        payload: Any = (
            [_entry(data) for _ in range(data.ConsumeIntInRange(0, 12))]
            if data.ConsumeIntInRange(0, 4)
            else _value(data)
        )
        signer = {2: SERIALIZER, 3: OLD_ONLY, 4: FOREIGN, 5: SERIALIZER}[mode]
        value = signer.dumps(payload)
        if mode == 5 and value:  # tamper with one character
            index = data.ConsumeIntInRange(0, len(value) - 1)
            value = value[:index] + chr(data.ConsumeIntInRange(0, 0x10FFFF)) + value[index + 1 :]
        if mode == 4:
            assert state_cookie.decode(SERIALIZER, value, ttl, NOW) == []  # foreign key
    flows = state_cookie.decode(SERIALIZER, value, ttl, NOW)
    check_flows(flows, ttl, NOW)


def fuzz_next_path(raw: bytes) -> None:
    data = atheris.FuzzedDataProvider(raw)
    value = data.ConsumeUnicode(data.remaining_bytes())
    result = redirects.safe_next_path(value)
    if result is None:
        return
    assert result == value
    assert result.startswith("/"), result
    assert not result.startswith("//"), result
    assert "\\" not in result, result
    assert all(0x21 <= ord(char) <= 0x7E for char in result), result
    parts = urlsplit(result)
    assert not parts.scheme, result
    assert not parts.netloc, result
    resolved = urlsplit(urljoin("https://app.example/some/page", result))
    assert resolved.scheme == "https", result
    assert resolved.netloc == "app.example", result


TARGETS: dict[str, Callable[[bytes], None]] = {
    "state_cookie": fuzz_state_cookie,
    "next_path": fuzz_next_path,
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        raise SystemExit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} [libFuzzer flags]")
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
