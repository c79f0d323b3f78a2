"""ID tokens: signature, algorithm and claims checks, and their use in a sign-in and a refresh.

The provider is the real OpenID provider on loopback (:class:`LocalIdentityProvider`), made to
misbehave with its knobs; where a test needs an answer that provider cannot give (an EC key, an
HMAC token, a provider that does not rotate refresh tokens), :class:`FakeOpenIDProvider` serves
hand-signed answers (signed with joserfc) from the fault server.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import json
import logging
import time
from typing import Any, Final

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import (
    CLIENT_ID,
    CLIENT_SECRET,
    FakeOpenIDProvider,
    MakeApp,
    Tamper,
    assert_not_logged,
    discovery_block,
    fake_app,
    finish_fake,
    local_provider,
    plain_block,
    sign_in,
    signed,
    signed_in_info,
    start_fake,
    token_strings,
    watch,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from flask_social_oauth2 import OAuth2Info
from flask_social_oauth2.errors import (
    AuthenticationError,
    ConfigurationError,
    IdTokenError,
    ProfileRetrievalError,
    UnexpectedResponseError,
)
from flask_social_oauth2.local_idp import LocalIdentityProvider

# -- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "key", "message"),
    [
        ({"idTokenAlgorithms": "RS256 HS256"}, "customProperties.idTokenAlgorithms", "HS256"),
        ({"idTokenAlgorithms": "none"}, "customProperties.idTokenAlgorithms", "'none'"),
        ({"idTokenAlgorithms": " "}, "customProperties.idTokenAlgorithms", "asymmetric"),
        ({"idTokenLeeway": "ten"}, "customProperties.idTokenLeeway", "seconds"),
        ({"idTokenLeeway": "900"}, "customProperties.idTokenLeeway", "300"),
        ({"idTokenLeeway": "\xb2"}, "customProperties.idTokenLeeway", "seconds"),
        ({"idTokenLeeway": "\u0663\u0660"}, "customProperties.idTokenLeeway", "ASCII"),
        ({"idTokenLeeway": "-5"}, "customProperties.idTokenLeeway", "seconds"),
        ({"idTokenLeeway": "1.5"}, "customProperties.idTokenLeeway", "seconds"),
        ({"idTokenLeeway": " 30"}, "customProperties.idTokenLeeway", "seconds"),
        ({"idTokenLeeway": ""}, "customProperties.idTokenLeeway", "seconds"),
    ],
)
def test_id_token_properties_are_checked_at_setup(
    make_app: MakeApp, properties: dict[str, str], key: str, message: str
) -> None:
    block = {
        "accessTokenURL": "https://id.example/token",
        "redirectURL": "/authenticate/corp",
        "apiURL": "https://id.example/userinfo",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid",
        "customProperties": properties,
    }
    with pytest.raises(ConfigurationError) as raised:
        make_app({"corp": block})
    problems = [p for p in raised.value.problems if p.key == key]
    assert problems, raised.value
    assert message in problems[0].message
    assert problems[0].provider == "corp"


def test_verifying_without_joserfc_is_a_setup_error(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name == "joserfc" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    block = {
        "accessTokenURL": "https://oauth2.googleapis.com/token",
        "redirectURL": "/authenticate/google",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid email",
    }
    with pytest.raises(ConfigurationError, match="pip install joserfc"):
        make_app({"google": block})
    make_app({"google": {**block, "scope": "email"}})  # plain OAuth 2.0 needs no joserfc


def test_info_repr_names_claims_only() -> None:
    info = OAuth2Info(
        access_token="at-secret",
        refresh_token="rt-secret",
        params={"id_token": "idt-secret"},
        id_token_claims={"sub": "user-secret-id", "email": "a@example.test"},
    )
    shown = repr(info)
    for secret in ("at-secret", "rt-secret", "idt-secret", "user-secret-id", "a@example.test"):
        assert secret not in shown
    assert "id_token_claims=<email, sub>" in shown
    with pytest.raises(TypeError):
        info.id_token_claims["sub"] = "x"  # type: ignore[index]


# -- ID token verification against the real provider ---------------------------------------------


def _claims(**changes: Any) -> Tamper:
    def tamper(
        header: dict[str, Any], claims: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        updated = {**claims, **changes}
        return header, {key: value for key, value in updated.items() if value is not None}

    return tamper


def _header(**changes: Any) -> Tamper:
    def tamper(
        header: dict[str, Any], claims: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return {**header, **changes}, claims

    return tamper


def _times(exp: int, iat: int) -> Tamper:
    def tamper(
        header: dict[str, Any], claims: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        now = int(time.time())
        return header, {**claims, "exp": now + exp, "iat": now + iat}

    return tamper


BAD_ID_TOKENS: dict[str, tuple[Tamper | None, str, str]] = {
    "wrong-signature": (None, "other_key", "signature is not valid"),
    "alg-none": (None, "none", "algorithm 'none' is not allowed"),
    "wrong-iss": (_claims(iss="https://evil.example"), "key", "iss is not the provider's"),
    "wrong-aud": (_claims(aud="another-client"), "key", "aud does not name this client"),
    "no-aud": (_claims(aud=None), "key", "lacks the claims aud"),
    "audiences-without-azp": (_claims(aud=[CLIENT_ID, "x"]), "key", "several audiences"),
    "wrong-azp": (_claims(azp="another-client"), "key", "azp is not this client"),
    "expired": (_times(exp=-600, iat=-1200), "key", "expired"),
    "issued-in-the-future": (_times(exp=1200, iat=600), "key", "'iat' is not valid"),
    "no-exp": (_claims(exp=None), "key", "lacks the claims exp"),
    "no-sub": (_claims(sub=None), "key", "lacks the claims sub"),
    "missing-nonce": (_claims(nonce=None), "key", "nonce is not the one of this sign-in"),
    "wrong-nonce": (_claims(nonce="another-nonce"), "key", "nonce is not the one of this"),
    "unknown-kid": (_header(kid="unknown-kid"), "key", "no key of the provider's key set"),
}


@pytest.mark.parametrize("case", list(BAD_ID_TOKENS))
def test_bad_id_token_is_refused(
    case: str,
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    tamper, signing, message = BAD_ID_TOKENS[case]
    idp.id_token_tamper = tamper
    idp.sign_id_token_with = signing  # type: ignore[assignment]
    app = make_app({"local": discovery_block(idp)})
    outcome = watch(app)
    client = app.test_client()
    response = sign_in(client)
    assert response.status_code == 502
    assert isinstance(outcome.error, IdTokenError)
    assert message in str(outcome.error)
    assert outcome.infos == []
    with client.session_transaction() as session:
        assert "social_profile" not in session
    assert idp.userinfo_requests == []  # no profile fetched with an unverified token
    secrets = token_strings(issued)
    assert not any(secret in response.text or secret in str(outcome.error) for secret in secrets)
    assert_not_logged(captured_logs, secrets)


def test_clock_skew_within_the_leeway_is_accepted(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    idp.id_token_tamper = _times(exp=-20, iat=30)
    app = make_app({"local": discovery_block(idp)})
    assert sign_in(app.test_client()).status_code == 302
    strict = make_app({"local": discovery_block(idp, idTokenLeeway="0")})
    outcome = watch(strict)
    assert sign_in(strict.test_client()).status_code == 502
    assert isinstance(outcome.error, IdTokenError)


def test_several_audiences_with_azp_are_accepted(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    idp.id_token_tamper = _claims(aud=[CLIENT_ID, "another-client"], azp=CLIENT_ID)
    app = make_app({"local": discovery_block(idp)})
    assert sign_in(app.test_client()).status_code == 302


def test_unknown_kid_refetches_the_key_set_once(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": discovery_block(idp)})
    outcome = watch(app)
    assert sign_in(app.test_client()).status_code == 302
    assert idp.jwks_requests == 1
    idp.id_token_tamper = _header(kid="made-up-kid")
    for _ in range(3):
        assert sign_in(app.test_client()).status_code == 502
    # One refetch for the unknown kid, then none within KEY_REFETCH_INTERVAL.
    assert idp.jwks_requests == 2
    assert all(isinstance(error, IdTokenError) for error in outcome.errors)


def test_rotated_signing_key_is_fetched_once(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    app = make_app({"local": discovery_block(idp)})
    assert sign_in(app.test_client()).status_code == 302
    idp.rotate_signing_key()
    assert sign_in(app.test_client()).status_code == 302
    assert sign_in(app.test_client()).status_code == 302
    assert idp.jwks_requests == 2


def test_plain_oauth_block_is_not_verified(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    """Without an issuer (and not a built-in OpenID provider) nothing changes: no discovery."""
    idp.sign_id_token_with = "none"
    app = make_app({"local": idp.settings_block(CLIENT_ID, CLIENT_SECRET, "/authenticate/local")})
    outcome = watch(app)
    assert sign_in(app.test_client()).status_code == 302
    assert outcome.infos[0].id_token_claims is None
    assert (idp.discovery_requests, idp.jwks_requests) == (0, 0)


# -- a hand-signed provider on the fault server ----------------------------------------------------


def test_es256_id_token_fills_the_profile_without_userinfo(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey, ec_key: ECKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, ec_key, userinfo=False)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    assert query["nonce"]
    fake.serve_token(signed(ec_key, "ES256", fake.claims(nonce=query["nonce"])))
    assert finish_fake(client, query["state"]).status_code == 302
    (profile,) = outcome.profiles
    assert (profile.provider_key, profile.full_name, profile.email) == (
        "user-1",
        "Ada Lovelace",
        "ada@example.test",
    )
    assert profile.first_name == "Ada"
    assert fault_server.count("/userinfo") == 0


def test_id_token_without_kid_uses_the_matching_key(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey, ec_key: ECKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, ec_key, userinfo=False)
    app = fake_app(make_app, fault_server)
    client = app.test_client()
    query = start_fake(client)
    anonymous = RSAKey.import_key(rsa_key.as_dict(private=True) | {"kid": ""})
    token = jwt.encode({"alg": "RS256"}, fake.claims(nonce=query["nonce"]), anonymous)
    assert "kid" not in json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    fake.serve_token(token)
    assert finish_fake(client, query["state"]).status_code == 302


def _segment(part: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()


def _unsigned(claims: dict[str, Any]) -> str:
    return f"{_segment({'alg': 'none', 'kid': 'rsa-1'})}.{_segment(claims)}."


@pytest.mark.parametrize(
    ("forgery", "message"),
    [
        ("hmac-with-public-key", "algorithm 'HS256' is not allowed"),
        ("alg-none", "algorithm 'none' is not allowed"),
        ("alg-not-announced", "algorithm 'RS384' is not allowed"),
        ("garbage", "not a signed JWT"),
        ("not-a-string", "missing or not a string"),
    ],
)
def test_forged_id_tokens_are_refused(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey, forgery: str, message: str
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    claims = fake.claims(nonce=query["nonce"])
    token: Any
    if forgery == "hmac-with-public-key":
        # joserfc itself refuses a public key as an HMAC secret, so the forgery is made by hand.
        signing_input = ".".join(
            _segment(part) for part in ({"alg": "HS256", "kid": "rsa-1"}, claims)
        )
        mac = hmac.new(rsa_key.as_pem(private=False), signing_input.encode(), hashlib.sha256)
        token = f"{signing_input}.{base64.urlsafe_b64encode(mac.digest()).rstrip(b'=').decode()}"
    elif forgery == "alg-none":
        token = _unsigned(claims)
    elif forgery == "alg-not-announced":  # the discovery document lists RS256 and ES256
        token = signed(rsa_key, "RS384", claims)
    elif forgery == "garbage":
        token = "a.b.c"
    else:
        token = 12345
    fake.serve_token(token)
    assert finish_fake(client, query["state"]).status_code == 502
    assert isinstance(outcome.error, IdTokenError)
    assert message in str(outcome.error)


def test_posted_code_is_verified_without_a_nonce(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    """A client-side framework POSTs the code: no server-side state, so no nonce to compare,
    but the ID token is verified all the same."""
    fake = FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    posted = {"code": "c", "code_verifier": "v" * 43}
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce="chosen-by-the-browser")))
    assert client.post("/authenticate/fake", json=posted).status_code == 302
    assert outcome.profiles[0].provider_key == "user-1"
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(aud="another-client")))
    assert client.post("/authenticate/fake", json=posted).status_code == 502
    assert isinstance(outcome.error, IdTokenError)


def test_token_response_without_id_token_is_refused(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    fake.serve_token(None)
    assert finish_fake(client, query["state"]).status_code == 502
    assert "no id_token" in str(outcome.error)


def test_userinfo_of_another_user_is_refused(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    fault_server.set("/userinfo", Behaviour.json({"sub": "someone-else", "name": "Mallory"}))
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"])))
    assert finish_fake(client, query["state"]).status_code == 502
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert "sub" in str(outcome.error)


def test_algorithm_allow_list_from_custom_properties(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey, ec_key: ECKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, ec_key)
    fault_server.set("/userinfo", Behaviour.json({"sub": "user-1"}))
    properties = {"issuer": fault_server.url, "idTokenAlgorithms": "ES256"}
    app = fake_app(make_app, fault_server, customProperties=properties)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"])))
    assert finish_fake(client, query["state"]).status_code == 502
    assert "algorithm 'RS256' is not allowed" in str(outcome.error)


def test_builtin_class_accepts_its_extra_issuer(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    """Google's ID tokens may say ``accounts.google.com`` without the scheme."""
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    fault_server.set("/userinfo", Behaviour.json({"sub": "user-1"}))
    app = fake_app(
        make_app,
        fault_server,
        apiURL=f"{fault_server.url}/userinfo",
        classes={"fake": "google"},
    )
    assert type(local_provider(app, "fake")).__name__ == "GoogleProvider"
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    token = signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"], iss="accounts.google.com"))
    fake.serve_token(token)
    assert finish_fake(client, query["state"]).status_code == 302
    assert outcome.infos[0].id_token_claims is not None


# -- whatever the ID token's claims say (issue 12 T3) ---------------------------------------------

CLAIMS: Final = [
    "iss",
    "sub",
    "aud",
    "azp",
    "exp",
    "iat",
    "nbf",
    "nonce",
    "tid",
    "name",
    "given_name",
    "family_name",
    "email",
    "email_verified",
    "picture",
]
ODD_VALUES: Final = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, -(10**400), 2**63, -1, 0])
    | st.floats()
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def rs256_by_hand(header: dict[str, Any], claims: dict[str, Any], key: RSAKey) -> str:
    """A JWS signed with ``key``, whatever its header and claims hold (joserfc would refuse to
    make one with, say, a ``kid`` that is not a string)."""
    signing_input = f"{_segment(header)}.{_segment(claims)}".encode()
    private = key.private_key
    assert isinstance(private, rsa.RSAPrivateKey)
    signature = private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input.decode()}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def test_no_id_token_claim_gives_a_500_or_leaks_a_secret(
    make_app: MakeApp,
    fault_server: FaultServer,
    rsa_key: RSAKey,
    captured_logs: list[logging.LogRecord],
) -> None:
    """A correctly signed ID token whose claims and header carry odd numbers, types and
    Unicode: the sign-in succeeds or is a 4xx/502, never a 500, and no secret is shown."""
    fake = FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    seen: set[int] = set()

    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        changes=st.dictionaries(st.sampled_from(CLAIMS), ODD_VALUES, max_size=3),
        header=st.dictionaries(st.sampled_from(["kid", "typ", "cty", "x5u"]), ODD_VALUES),
    )
    def check(changes: dict[str, Any], header: dict[str, Any]) -> None:
        captured_logs.clear()
        outcome.errors.clear()
        client = app.test_client()
        query = start_fake(client)
        claims = {**fake.claims(nonce=query["nonce"]), **changes}
        token = rs256_by_hand({"alg": "RS256", "kid": "rsa-1", **header}, claims, rsa_key)
        fake.serve_token(token)
        response = finish_fake(client, query["state"])
        seen.add(response.status_code)
        assert response.status_code in (302, 400, 502), response.status_code
        secrets = [CLIENT_SECRET, "the-code", "fake-access-token", token, query["nonce"]]
        assert not any(secret in response.text for secret in secrets)
        if response.status_code != 302:
            (error,) = outcome.errors
            assert not any(secret in str(error) for secret in secrets)
        assert not any(record.exc_info for record in captured_logs)
        assert_not_logged(captured_logs, secrets)

    check()
    assert {302, 502} <= seen


# -- refresh -------------------------------------------------------------------------------------


def test_refresh_rotates_the_refresh_token(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    app = make_app({"local": discovery_block(idp)})
    first = signed_in_info(app)
    assert first.refresh_token is not None
    provider = local_provider(app)
    with app.app_context():
        second = provider.refresh(first)
    assert idp.token_requests[-1].grant_type == "refresh_token"
    assert second.access_token != first.access_token
    assert second.refresh_token not in (None, first.refresh_token)
    assert second.expires_in == 3600
    assert second.id_token_claims == first.id_token_claims  # no new ID token: claims kept
    with app.app_context():
        with pytest.raises(UnexpectedResponseError, match="invalid_grant") as raised:
            provider.refresh(first)  # the rotated-away refresh token is spent
        third = provider.refresh(second)
    assert raised.value.status_code == 502
    assert third.access_token not in (first.access_token, second.access_token)
    assert_not_logged(captured_logs, token_strings(issued))


def test_refresh_with_a_revoked_refresh_token_fails(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    app = make_app({"local": discovery_block(idp)})
    info = signed_in_info(app)
    idp.revoke_refresh_tokens()
    with app.app_context(), pytest.raises(UnexpectedResponseError) as raised:
        local_provider(app).refresh(info)
    message = str(raised.value)
    assert "refresh request failed" in message
    assert "invalid_grant" in message
    secrets = token_strings(issued)
    assert not any(secret in message for secret in secrets)
    assert_not_logged(captured_logs, secrets)


def refresh_app(make_app: MakeApp, server: FaultServer, **custom: str) -> Flask:
    block = plain_block(server, **custom)
    return make_app({"plain": block}, SOCIAL_OAUTH2_TIMEOUT=1)


def test_refresh_keeps_the_refresh_token_a_provider_does_not_rotate(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set(
        "/token", Behaviour.json({"access_token": "new-access", "expires_in": "60", "scope": "a"})
    )
    app = refresh_app(make_app, fault_server)
    old = OAuth2Info(access_token="old-access", refresh_token="keep-me")
    with app.app_context():
        new = local_provider(app, "plain").refresh(old, scope="a")
    assert (new.access_token, new.refresh_token, new.expires_in) == ("new-access", "keep-me", 60)
    assert new.params == {"scope": "a"}
    (request,) = fault_server.requests
    form = {key: values[0] for key, values in request.form().items()}
    assert form == {
        "grant_type": "refresh_token",
        "refresh_token": "keep-me",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "scope": "a",
    }


def test_refresh_with_basic_client_authentication(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "new", "refresh_token": "next"}))
    app = refresh_app(make_app, fault_server, tokenEndpointAuthMethod="client_secret_basic")
    with app.app_context():
        new = local_provider(app, "plain").refresh(OAuth2Info(access_token="a", refresh_token="r"))
    assert new.refresh_token == "next"
    (request,) = fault_server.requests
    assert request.headers["Authorization"].startswith("Basic ")
    assert "client_secret" not in request.form()


@pytest.mark.parametrize(
    ("behaviour", "status"),
    [
        (Behaviour.json({"error": "server_error"}, status=500), 502),
        (Behaviour.html("<p>down</p>"), 502),
        (Behaviour.json({"token_type": "bearer"}), 502),
        (Behaviour.json({"access_token": "x", "token_type": "mac"}), 502),
        (Behaviour.hang(), 504),
    ],
    ids=["http-500", "html", "no-access-token", "token-type", "timeout"],
)
def test_refresh_failures_are_unexpected_response_errors(
    make_app: MakeApp, fault_server: FaultServer, behaviour: Behaviour, status: int
) -> None:
    fault_server.set("/token", behaviour)
    app = refresh_app(make_app, fault_server)
    with app.app_context(), pytest.raises(UnexpectedResponseError) as raised:
        local_provider(app, "plain").refresh(OAuth2Info(access_token="a", refresh_token="r-tok"))
    assert raised.value.status_code == status
    assert "refresh request" in str(raised.value)
    assert "r-tok" not in str(raised.value)


def test_refresh_without_refresh_token_is_a_clear_error(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    app = refresh_app(make_app, fault_server)
    with app.app_context(), pytest.raises(AuthenticationError, match="no refresh_token"):
        local_provider(app, "plain").refresh(OAuth2Info(access_token="a"))
    assert fault_server.count() == 0


def test_refresh_needs_an_app_context(make_app: MakeApp, fault_server: FaultServer) -> None:
    app = refresh_app(make_app, fault_server)
    provider = local_provider(app, "plain")
    with pytest.raises(RuntimeError, match="application context"):
        provider.refresh(OAuth2Info(access_token="a", refresh_token="r"))


def test_refreshed_id_token_is_verified_and_must_keep_the_user(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    app = fake_app(make_app, fault_server)
    provider = local_provider(app, "fake")
    old = OAuth2Info(access_token="a", refresh_token="r", id_token_claims=fake.claims(), params={})
    fake.serve_token(signed(rsa_key, "RS256", fake.claims()), refresh_token="r2")
    with app.app_context():
        new = provider.refresh(old)
    assert new.id_token_claims is not None
    assert new.id_token_claims["sub"] == "user-1"
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(sub="user-2")))
    with app.app_context(), pytest.raises(IdTokenError, match="sub"):
        provider.refresh(old)
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(aud="another-client")))
    with app.app_context(), pytest.raises(IdTokenError, match="aud"):
        provider.refresh(old)
