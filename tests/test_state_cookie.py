"""The signed cookie of started flows."""

from __future__ import annotations

import pytest
from flask import Flask
from itsdangerous import URLSafeTimedSerializer

from flask_social_oauth2.errors import SocialOAuth2Error
from flask_social_oauth2.oauth import flow
from flask_social_oauth2.web import state_cookie
from flask_social_oauth2.web.state_cookie import (
    MAX_COOKIE_VALUE,
    MAX_PENDING_FLOWS,
    PendingFlow,
    StateCookieStore,
    decode,
    encode,
    find,
    make_serializer,
)


def pending(index: int, created: int = 1_000_000, next_url: str | None = "/") -> PendingFlow:
    return PendingFlow(
        state=flow.new_state(),
        provider=f"p{index}",
        redirect_uri="https://app.example/authenticate/github",
        verifier=flow.new_verifier(),
        next_url=next_url,
        created=created + index,
        nonce=flow.new_nonce(),
    )


def test_round_trip() -> None:
    serializer = make_serializer("key")
    flows = [pending(0), pending(1)]
    value = encode(serializer, flows)
    assert decode(serializer, value, ttl=600, now=1_000_010) == flows


def test_a_foreign_key_reads_as_no_flows() -> None:
    value = encode(make_serializer("key"), [pending(0)])
    assert decode(make_serializer("other"), value, ttl=600, now=1_000_010) == []


def test_fallback_keys_are_accepted_for_rotation() -> None:
    value = encode(make_serializer("old"), [pending(0)])
    assert len(decode(make_serializer("new", ["old"]), value, ttl=600, now=1_000_010)) == 1


@pytest.mark.parametrize("value", [None, "", "garbage", "a.b.c", "x" * 10_000])
def test_garbage_reads_as_no_flows(value: str | None) -> None:
    assert decode(make_serializer("key"), value, ttl=600, now=0) == []


def test_entries_of_the_wrong_shape_are_dropped() -> None:
    serializer = make_serializer("key")
    value = serializer.dumps([["only", "three", "items"], pending(0).to_list(), "x", None])
    assert [f.provider for f in decode(serializer, value, ttl=600, now=1_000_010)] == ["p0"]


def test_expired_entries_are_dropped() -> None:
    serializer = make_serializer("key")
    value = encode(serializer, [pending(0, created=100), pending(1, created=1000)])
    assert [f.provider for f in decode(serializer, value, ttl=600, now=1200)] == ["p1"]


def test_abandoned_flows_are_capped_oldest_first() -> None:
    flows = [pending(index) for index in range(50)]
    serializer = make_serializer("key")
    value = encode(serializer, flows)
    assert value is not None
    assert len(value) <= MAX_COOKIE_VALUE
    kept = decode(serializer, value, ttl=600, now=1_000_100)
    assert [f.provider for f in kept] == [f"p{i}" for i in range(50 - MAX_PENDING_FLOWS, 50)]


def test_long_next_values_still_fit() -> None:
    flows = [pending(index, next_url="/" + "n" * 510) for index in range(8)]
    value = encode(make_serializer("key"), flows)
    assert value is not None
    assert len(value) <= MAX_COOKIE_VALUE


def test_no_flows_means_no_cookie() -> None:
    assert encode(make_serializer("key"), []) is None


def test_find_compares_every_entry() -> None:
    flows = [pending(0), pending(1)]
    assert find(flows, flows[1].state) is flows[1]
    assert find(flows, flows[1].state[:-1]) is None
    assert find(flows, "") is None


def test_the_payload_is_itsdangerous_url_safe_format() -> None:
    """The cookie keeps the format of :class:`URLSafeTimedSerializer`, so either reads the other
    (the custom payload only skips the zlib attempt)."""
    flows = [pending(0)]
    ours = encode(make_serializer("key"), flows)
    assert ours is not None
    theirs = URLSafeTimedSerializer(["key"], salt=make_serializer("key").salt)
    assert theirs.loads(ours) == [flows[0].to_list()]
    value = theirs.dumps([flows[0].to_list()])
    assert decode(make_serializer("key"), value, ttl=600, now=1_000_010) == flows


def test_the_store_builds_its_signer_once_per_key_set() -> None:
    app = Flask(__name__)
    app.secret_key = "one"
    store = StateCookieStore(name="c")
    first = store.serializer(app)
    assert store.serializer(app) is first
    app.config["SECRET_KEY_FALLBACKS"] = ["zero"]
    second = store.serializer(app)
    assert second is not first
    assert decode(second, encode(make_serializer("zero"), [pending(0)]), 600, 1_000_010)


def test_the_store_needs_a_secret_key() -> None:
    with pytest.raises(SocialOAuth2Error, match="SECRET_KEY"):
        StateCookieStore(name="c").serializer(Flask(__name__))


def test_the_store_keeps_flows_per_request_not_on_itself() -> None:
    app = Flask(__name__)
    app.secret_key = "key"
    store = StateCookieStore(name="flows", ttl=600)
    flow_one = pending(0, created=state_cookie.now())
    with app.test_request_context():
        store.save([flow_one])
        assert store.load() == [flow_one]
        response = app.process_response(app.response_class())
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("flows=")
    with app.test_request_context():
        assert store.load() == []  # another request (another browser) sees none of them
    value = cookie.split(";", 1)[0].split("=", 1)[1]
    with app.test_request_context(headers={"Cookie": f"flows={value}"}):
        assert store.load() == [flow_one]
    assert "flows" in repr(store)
    assert value not in repr(store)


def test_a_compressed_bomb_reads_as_no_flows() -> None:
    serializer = URLSafeTimedSerializer(["key"], salt=make_serializer("key").salt)
    value = serializer.dumps([["x" * 4_000_000]])
    assert value.startswith(".")
    assert len(value) < MAX_COOKIE_VALUE * 2  # small enough to reach the decompression
    assert decode(make_serializer("key"), value, ttl=600, now=0) == []


@pytest.mark.parametrize("secure", [False, True])
@pytest.mark.parametrize("path", ["/", "/auth", "/a b;c/ü", "/%2F!$&'()*+,:=@"])
@pytest.mark.parametrize("ttl", [1, 600])
def test_the_set_cookie_value_is_what_werkzeug_writes(secure: bool, path: str, ttl: int) -> None:
    from werkzeug.http import dump_cookie

    store = StateCookieStore(name="social_oauth2_state_ab12cd34", path=path, ttl=ttl, scope="s")
    signed = make_serializer("key").dumps([pending(0).to_list()])
    for value in (signed, ""):  # a cookie written, and one deleted
        expected = dump_cookie(
            store.cookie_name(secure),
            value,
            max_age=ttl if value else 0,
            path="/" if secure else path,
            secure=secure,
            httponly=True,
            samesite="Lax",
            sync_expires=False,
            max_size=4093,
        )
        assert store._set_cookie_value(value, secure, 4093) == expected
        assert store._set_cookie_value(value, secure, 0) == expected


def test_an_oversized_set_cookie_value_warns_as_werkzeug_does() -> None:
    store = StateCookieStore(name="social_oauth2_state_ab12cd34", ttl=600)
    value = make_serializer("key").dumps([pending(0).to_list()])
    with pytest.warns(UserWarning, match="cookie is too large"):
        cookie = store._set_cookie_value(value, False, 100)
    assert cookie.startswith(f"social_oauth2_state_ab12cd34={value}; Max-Age=600; HttpOnly")
