"""Token encryption, the token record, the session token store and SOCIAL_OAUTH2_TOKEN_STORE."""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime
from typing import Any
from uuid import UUID

import pytest
from cryptography.fernet import Fernet
from flask import Flask, jsonify, session
from helpers import MakeApp, RotatingRenewer, make_token, sign_in
from itsdangerous import URLSafeTimedSerializer
from markupsafe import Markup

from flask_social_oauth2.config.settings import OAuth2Info
from flask_social_oauth2.errors import ConfigurationError, SignInRequiredError
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.runtime import current_runtime
from flask_social_oauth2.tokens import (
    SessionTokenStore,
    SQLAlchemyTokenStore,
    TokenCipher,
    TokenStore,
    derive_key,
    refresh_due,
)
from flask_social_oauth2.tokens.cipher import InvalidToken, app_cipher
from flask_social_oauth2.tokens.record import dump_record, load_record
from flask_social_oauth2.tokens.session import MAX_COOKIE_HEADER
from flask_social_oauth2.tokens.store import seal, unseal


def _session_payload(app: Flask, cookie: str) -> dict[str, Any]:
    serializer = app.session_interface.get_signing_serializer(app)  # type: ignore[attr-defined]
    assert isinstance(serializer, URLSafeTimedSerializer)
    payload: dict[str, Any] = serializer.loads(cookie)
    return payload


def _store_app(make_app: MakeApp, **config: Any) -> Flask:
    """An app with routes that save, load and refresh through the configured store."""
    app = make_app(**config)

    @app.post("/save/<provider>/<key>")
    def save(provider: str, key: str) -> Any:
        store = current_runtime().token_store
        assert store is not None
        store.save(provider, key, OAuth2Info(**app.config["NEXT_TOKEN"]))
        return "saved"

    @app.get("/load/<provider>/<key>")
    def load(provider: str, key: str) -> Any:
        store = current_runtime().token_store
        assert store is not None
        info = store.load(provider, key)
        return jsonify(access_token=None if info is None else info.access_token)

    @app.post("/refresh/<provider>/<key>")
    def refresh(provider: str, key: str) -> Any:
        store = current_runtime().token_store
        assert store is not None
        return jsonify(access_token=store.refresh(provider, key, app.config["RENEW"]).access_token)

    return app


def _token_fields(info: OAuth2Info) -> dict[str, Any]:
    return {
        "access_token": info.access_token,
        "token_type": info.token_type,
        "expires_in": info.expires_in,
        "refresh_token": info.refresh_token,
        "params": dict(info.params),
        "expires_at": info.expires_at,
    }


# -- encryption ---------------------------------------------------------------------------------


def test_cipher_round_trip_and_rotation() -> None:
    old, new = Fernet.generate_key(), Fernet.generate_key()
    sealed_old = TokenCipher([old]).encrypt(b"record")
    rotated = TokenCipher([new, old])
    assert rotated.decrypt(sealed_old) == b"record"
    sealed_new = rotated.encrypt(b"record")
    assert TokenCipher([new]).decrypt(sealed_new) == b"record"
    with pytest.raises(InvalidToken):
        TokenCipher([old]).decrypt(sealed_new)
    assert "hidden" in repr(rotated)
    assert old.decode() not in repr(rotated)


def test_key_derived_from_secret_key_and_fallbacks_decrypt() -> None:
    before = app_cipher({"SECRET_KEY": "first secret"})
    sealed = before.encrypt(b"x")
    after = app_cipher({"SECRET_KEY": "second secret", "SECRET_KEY_FALLBACKS": ["first secret"]})
    assert after.decrypt(sealed) == b"x"
    assert derive_key("first secret") != derive_key("second secret")
    assert derive_key("first secret") == derive_key(b"first secret")
    with pytest.raises(InvalidToken):
        app_cipher({"SECRET_KEY": "second secret"}).decrypt(sealed)


def test_keys_are_checked_and_derived_once_per_key_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from flask_social_oauth2.tokens import cipher as cipher_module

    derived: list[object] = []

    def counting_derive_key(secret: str | bytes) -> bytes:
        derived.append(secret)
        return derive_key(secret)

    monkeypatch.setattr(cipher_module, "derive_key", counting_derive_key)
    config: dict[str, Any] = {"SECRET_KEY": "once secret", "SECRET_KEY_FALLBACKS": ["old secret"]}
    first = app_cipher(config)
    assert len(derived) == 2
    for _ in range(5):
        assert app_cipher(config) is first
    assert len(derived) == 2
    sealed = first.encrypt(b"x")
    config["SECRET_KEY"] = "rotated secret"  # the same mapping, a new key set: a new cipher
    config["SECRET_KEY_FALLBACKS"] = []
    with pytest.raises(InvalidToken):
        app_cipher(config).decrypt(sealed)
    assert len(derived) == 3
    config["SECRET_KEY"] = ""
    for _ in range(2):  # a missing key is refused every time, never remembered
        with pytest.raises(ConfigurationError, match="SECRET_KEY"):
            app_cipher(config)


def test_configured_keys_are_checked_without_showing_them(make_app: MakeApp) -> None:
    bad = "not-a-key-but-a-secret-looking-value"
    with pytest.raises(ConfigurationError) as raised:
        make_app(SOCIAL_OAUTH2_TOKEN_KEYS=[Fernet.generate_key().decode(), bad])
    assert "SOCIAL_OAUTH2_TOKEN_KEYS" in str(raised.value)
    assert "entry 1" in str(raised.value)
    assert bad not in str(raised.value)
    with pytest.raises(ConfigurationError, match="list of Fernet keys"):
        make_app(SOCIAL_OAUTH2_TOKEN_KEYS=Fernet.generate_key().decode())
    with pytest.raises(ConfigurationError, match="at least one"):
        make_app(SOCIAL_OAUTH2_TOKEN_KEYS=[])


def test_record_keeps_only_what_is_needed() -> None:
    info = make_token(scope="read write", instance_url="https://eu1.example.test")
    info = OAuth2Info(
        **{
            **_token_fields(info),
            "params": {**info.params, "athlete": {"id": 1}, "big": "x" * 5000, "other_token": "t"},
        }
    )
    data = dump_record(info)
    assert info.params["id_token"] not in data.decode()
    again = load_record(data)
    assert again.access_token == info.access_token
    assert again.refresh_token == info.refresh_token
    assert again.expires_at == info.expires_at
    assert again.expires_in == info.expires_in
    assert dict(again.params) == {"scope": "read write", "instance_url": "https://eu1.example.test"}
    for damaged in (
        b"[]",
        b'{"v": 1}',
        b'{"v": 2, "access_token": "a"}',
        b'{"v": 1, "access_token": "a", "params": {"a": 1}}',
        b"\xff",
    ):
        with pytest.raises(ValueError):  # noqa: PT011 - any damage is a ValueError
            load_record(damaged)


def test_refresh_due_uses_the_leeway_capped_at_half_the_lifetime() -> None:
    now = 1_000_000.0
    long_lived = OAuth2Info(access_token="a", expires_in=3600, expires_at=now + 20)
    assert refresh_due(long_lived, now=now, leeway=30)
    assert not refresh_due(long_lived, now=now - 60, leeway=30)
    short_lived = OAuth2Info(access_token="a", expires_in=20, expires_at=now + 15)
    assert not refresh_due(short_lived, now=now, leeway=30)  # leeway capped at 10 s
    assert refresh_due(short_lived, now=now + 6, leeway=30)
    assert not refresh_due(OAuth2Info(access_token="a"), now=now, leeway=30)


def test_refresh_due_reads_the_leeway_init_app_read(make_app: MakeApp) -> None:
    now = 1_000_000.0
    token = OAuth2Info(access_token="a", expires_in=3600, expires_at=now + 100)
    app = make_app(SOCIAL_OAUTH2_REFRESH_LEEWAY=120)
    assert current_runtime(app).refresh_leeway == 120.0
    app.config["SOCIAL_OAUTH2_REFRESH_LEEWAY"] = 5  # read once, at init_app: no effect now
    with app.app_context():
        assert refresh_due(token, now=now)
        assert not refresh_due(token, now=now, leeway=30)  # a leeway given wins
    with make_app().app_context():
        assert not refresh_due(token, now=now)  # the default, 30 s
    with Flask("bare").app_context():
        assert refresh_due(token, now=now + 75)  # no extension: 30 s as well
        assert not refresh_due(token, now=now + 65)


# -- choosing the store ---------------------------------------------------------------------------


def test_token_store_setting(make_app: MakeApp, tmp_path: Any) -> None:
    for value, kind in (
        ("session", SessionTokenStore),
        ("sqlite:///tokens.sqlite3", SQLAlchemyTokenStore),
    ):
        app = make_app(SOCIAL_OAUTH2_TOKEN_STORE=value)
        with app.app_context():
            assert isinstance(current_runtime().token_store, kind)
    assert isinstance(make_app().extensions["social_oauth2"].token_store, SessionTokenStore)
    assert (
        make_app(SOCIAL_OAUTH2_TOKEN_STORE="none").extensions["social_oauth2"].token_store is None
    )
    mine = SessionTokenStore(session_key="mine")
    app = make_app(SOCIAL_OAUTH2_TOKEN_STORE=mine)
    assert app.extensions["social_oauth2"].token_store is mine
    assert isinstance(mine, TokenStore)
    for wrong in ("redis", 42, object()):
        with pytest.raises(ConfigurationError, match="SOCIAL_OAUTH2_TOKEN_STORE"):
            make_app(SOCIAL_OAUTH2_TOKEN_STORE=wrong)
    with pytest.raises(ConfigurationError, match="SOCIAL_OAUTH2_REFRESH_LEEWAY"):
        make_app(SOCIAL_OAUTH2_REFRESH_LEEWAY=-1)


# -- the session store ----------------------------------------------------------------------------


def test_sign_in_keeps_the_token_encrypted_in_the_session(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    from helpers import assert_not_logged, idp_block, token_strings

    app = _store_app(make_app, providers={"local": idp_block(idp, scope="openid profile")})
    client = app.test_client()
    assert sign_in(client).status_code == 302
    (info,) = issued
    cookie = client.get_cookie("session")
    assert cookie is not None
    payload = _session_payload(app, cookie.value)
    (entry,) = payload["social_oauth2_tokens"]
    key = entry[1]
    assert entry[0] == "local"
    assert payload["social_oauth2_identities"] == {"local": key}
    secrets_ = token_strings([info])
    for secret in secrets_:
        assert secret not in cookie.value
        assert secret not in json.dumps(payload)
    assert client.get(f"/load/local/{key}").json == {"access_token": info.access_token}
    other = app.test_client()
    assert other.get(f"/load/local/{key}").json == {"access_token": None}
    assert_not_logged(captured_logs, secrets_)


def test_store_none_keeps_nothing(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    from helpers import idp_block

    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_TOKEN_STORE="none")
    client = app.test_client()
    assert sign_in(client).status_code == 302
    cookie = client.get_cookie("session")
    assert cookie is not None
    assert "social_oauth2_tokens" not in _session_payload(app, cookie.value)


def test_tampered_session_entry_or_cookie_is_refused(make_app: MakeApp) -> None:
    token = make_token()
    app = _store_app(make_app, NEXT_TOKEN=_token_fields(token))
    client = app.test_client()
    client.post("/save/local/alice")
    assert client.get("/load/local/alice").json == {"access_token": token.access_token}
    with client.session_transaction() as session:  # re-signed: only the sealed token changed
        provider, key, sealed = session["social_oauth2_tokens"][0]
        session["social_oauth2_tokens"] = [[provider, key, sealed[:-6] + "AAAAAA"]]
    answer = client.get("/load/local/alice")
    assert answer.status_code == 401
    assert token.access_token not in answer.text
    client.post("/save/local/alice")
    cookie = client.get_cookie("session")
    assert cookie is not None
    client.set_cookie("session", cookie.value[:-3] + "abc")  # the signature no longer matches
    assert client.get("/load/local/alice").json == {"access_token": None}


def test_wrong_key_is_sign_in_required_for_that_identity(make_app: MakeApp) -> None:
    token = make_token()
    app = _store_app(make_app, NEXT_TOKEN=_token_fields(token))
    with app.test_request_context():
        sealed = seal(token)
    app.config["SECRET_KEY_FALLBACKS"] = []
    with app.test_request_context():
        assert unseal("local", "alice", sealed).access_token == token.access_token
        app.config["SOCIAL_OAUTH2_TOKEN_KEYS"] = [Fernet.generate_key().decode()]
        with pytest.raises(SignInRequiredError) as raised:
            unseal("local", "alice", sealed)
    assert raised.value.status_code == 401
    assert "'alice'" in str(raised.value)
    assert token.access_token not in str(raised.value)


def test_session_cookie_stays_under_the_bound(
    make_app: MakeApp, captured_logs: list[logging.LogRecord]
) -> None:
    app = _store_app(make_app)
    client = app.test_client()
    client.set_cookie("other", "x" * 300)
    for number in range(12):
        token = make_token()
        token = OAuth2Info(**{**_token_fields(token), "access_token": "a" * 300 + str(number)})
        app.config["NEXT_TOKEN"] = _token_fields(token)
        assert client.post(f"/save/local/user{number}").status_code == 200
        cookie = client.get_cookie("session")
        assert cookie is not None
        assert len(f"other={'x' * 300}; session={cookie.value}") < MAX_COOKIE_HEADER
    assert client.get("/load/local/user11").json == {"access_token": "a" * 300 + "11"}
    assert client.get("/load/local/user0").json == {"access_token": None}
    dropped = [r for r in captured_logs if "dropped the kept token" in r.getMessage()]
    assert dropped
    assert "'user0'" in dropped[0].getMessage()


def test_session_cookie_size_is_bounded_without_signing_until_near_the_limit(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flask.sessions import SecureCookieSessionInterface

    from flask_social_oauth2.tokens.session import _cookie_header_size

    app = make_app()
    signed: list[object] = []
    real = SecureCookieSessionInterface.get_signing_serializer

    def counting(self: SecureCookieSessionInterface, app: Flask) -> Any:
        signed.append(app)
        return real(self, app)

    with app.test_request_context(headers={"Cookie": "other=" + "x" * 200}):
        exact_serializer = real(app.session_interface, app)  # type: ignore[arg-type]
        assert exact_serializer is not None
        monkeypatch.setattr(SecureCookieSessionInterface, "get_signing_serializer", counting)
        store = SessionTokenStore()
        store.save("local", "alice", make_token())
        assert signed == []  # far under the bound: no second signed session cookie per sign-in
        for size in (0, 10, 500, 2000, 2900, 3100, 4000):
            session["filler"] = "ä" * (size // 2) + Fernet.generate_key().decode() * (size // 88)
            session["repeated"] = "r" * size
            exact = len(f"other={'x' * 200}; session={exact_serializer.dumps(dict(session))}")
            reckoned = _cookie_header_size()
            assert reckoned >= exact
            if reckoned > MAX_COOKIE_HEADER:
                assert reckoned == exact
        assert signed  # near the bound the cookie is built as Flask will


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ({"name": "Ada", "n": 1, "x": 1.5, "ok": True, "none": None, "l": [1, "ä", {}]}, True),
        ("caf\u00e9 \u2603 \U0001f600", True),
        (("a", "tuple"), False),
        ([{" t": ["looks", "tagged"]}], False),
        ({" di": {"a": 1}}, False),
        (b"bytes", False),
        ({"when": datetime(2026, 1, 2, 3, 4, 5)}, False),
        (Markup("<b>x</b>"), False),
        (UUID(int=7), False),
    ],
)
def test_the_sessions_json_length_is_the_serializers_or_it_is_asked(
    make_app: MakeApp, value: object, plain: bool
) -> None:
    """The length the token store reckons from the C encoder alone is exactly that of Flask's
    tagged serializer, or the serializer is asked (tuples, bytes, dates, Markup, UUIDs and
    tag-like keys are written otherwise)."""
    from flask_social_oauth2.tokens.session import _plain_json_length

    app = make_app()
    with app.test_request_context():
        data = {"social_oauth2_tokens": [["local", "alice", "gAAAAAabc"]], "value": value}
        reckoned = _plain_json_length(app, data)
        exact = len(app.session_interface.serializer.dumps(data))  # type: ignore[attr-defined]
    assert reckoned == (exact if plain else None)


def test_session_refresh_once_for_concurrent_requests_of_one_browser(make_app: MakeApp) -> None:
    token = make_token(expired=True)
    renewer = RotatingRenewer(token.refresh_token or "")
    app = _store_app(make_app, NEXT_TOKEN=_token_fields(token), RENEW=renewer)
    client = app.test_client()
    client.post("/save/local/alice")
    cookie = client.get_cookie("session")
    assert cookie is not None
    answers: list[Any] = []
    barrier = threading.Barrier(20)

    def call() -> None:
        browser = app.test_client()
        browser.set_cookie("session", cookie.value)
        barrier.wait()
        answers.append(browser.post("/refresh/local/alice"))

    threads = [threading.Thread(target=call) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert renewer.calls == 1
    newest = renewer.issued[-1].access_token
    assert [answer.status_code for answer in answers] == [200] * 20
    assert {answer.json["access_token"] for answer in answers} == {newest}


def test_session_refresh_refused_deletes_the_token(make_app: MakeApp) -> None:
    token = make_token(expired=True)
    renewer = RotatingRenewer("another refresh token")
    app = _store_app(make_app, NEXT_TOKEN=_token_fields(token), RENEW=renewer)
    client = app.test_client()
    client.post("/save/local/alice")
    assert client.post("/refresh/local/alice").status_code == 401
    assert client.get("/load/local/alice").json == {"access_token": None}
    assert client.post("/refresh/local/alice").status_code == 401
    assert renewer.calls == 1


def test_store_reprs_hide_tokens(make_app: MakeApp, tmp_path: Any) -> None:
    url = "postgresql://user:hunter2@127.0.0.1:1/db"
    assert "hunter2" not in repr(SQLAlchemyTokenStore(url))
    assert "session_key" in repr(SessionTokenStore())
    token = make_token()
    assert token.access_token not in repr(token)
    assert "expires_at" in repr(token)
