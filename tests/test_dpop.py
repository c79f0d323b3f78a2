"""DPoP keys, proofs and server nonces (flask_social_oauth2.oauth.dpop, RFC 9449): proofs
checked as a server checks them, the answers that ask for a nonce, and a PAR + DPoP sign-in at
panva's certified oidc-provider made with nothing but this module's proofs."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import pickle
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from helpers import in_threads
from hypothesis import given
from hypothesis import strategies as st
from joserfc import jws, jwt
from joserfc.jwk import ECKey, RSAKey
from oidc_provider_server import OidcProviderServer

from flask_social_oauth2.oauth import dpop, www_authenticate
from flask_social_oauth2.oauth.dpop import DPoPKey, NonceStore

Factory = Callable[..., OidcProviderServer]

#: RFC 9449 4.1's example proof key (public) and its thumbprint in Figure 10 (6.1 and 6.2).
RFC_JWK: dict[str, str] = {
    "kty": "EC",
    "x": "l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs",
    "y": "9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA",
    "crv": "P-256",
}
RFC_JKT = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
#: RFC 9449 7.1's example access token and the ``ath`` of its proof.
RFC_ACCESS_TOKEN = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
RFC_ATH = "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"
#: RFC 9449 8's example nonce.
RFC_NONCE = "eyJ7S_zG.eyJH0-Z.HX4w-7v"


def verify(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A proof checked as RFC 9449 4.3 has a server check it: a JWS with ``typ`` dpop+jwt, an
    asymmetric ``alg``, a public ``jwk`` that verifies the signature. Its header and claims."""
    header = jws.extract_compact(proof.encode()).protected
    assert header["typ"] == "dpop+jwt"
    assert header["alg"] == "ES256"
    assert set(header) == {"typ", "alg", "jwk"}
    assert "d" not in header["jwk"]
    token = jwt.decode(proof, ECKey.import_key(header["jwk"]), algorithms=["ES256"])
    return dict(token.header), dict(token.claims)


def public_key(jwk: Mapping[str, str]) -> ECKey:
    members: dict[str, str | list[str]] = dict(jwk)
    return ECKey.import_key(members)


def b64url_sha256(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


# -- keys ------------------------------------------------------------------------------------------


def test_a_generated_key_is_a_fresh_p256_key_named_by_its_thumbprint() -> None:
    key, other = DPoPKey.generate(), DPoPKey.generate()
    assert key != other
    assert key.thumbprint != other.thumbprint
    public = key.public_jwk()
    assert set(public) == {"kty", "crv", "x", "y"}
    assert (public["kty"], public["crv"]) == ("EC", "P-256")
    public["x"] = "changed"  # a copy: the key's own is untouched
    assert key.public_jwk()["x"] != "changed"


def test_the_thumbprint_is_rfc_7638() -> None:
    # joserfc's thumbprint gives RFC 9449's published value for its example key
    assert public_key(RFC_JWK).thumbprint() == RFC_JKT
    key = DPoPKey.generate()
    public = key.public_jwk()
    assert key.thumbprint == public_key(public).thumbprint()
    # RFC 7638 3: SHA-256 of the required members, sorted, no whitespace
    members = json.dumps(
        {name: public[name] for name in ("crv", "kty", "x", "y")}, separators=(",", ":")
    )
    assert key.thumbprint == b64url_sha256(members)


def test_export_and_load_give_the_same_key() -> None:
    key = DPoPKey.generate()
    text = key.export()
    assert json.loads(text)["d"]
    assert " " not in text
    loaded = DPoPKey.load(text)
    assert loaded == key
    assert loaded.thumbprint == key.thumbprint
    # a proof of the loaded key verifies with the original's public key
    header, _ = verify(dpop.proof(loaded, "GET", "https://rs.example/"))
    assert header["jwk"] == key.public_jwk()


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(json.dumps(RSAKey.generate_key(2048).as_dict(private=True)), id="rsa"),
        pytest.param(json.dumps(ECKey.generate_key("P-384").as_dict(private=True)), id="p-384"),
        pytest.param(json.dumps(ECKey.generate_key("secp256k1").as_dict(private=True)), id="k1"),
        pytest.param(json.dumps(ECKey.generate_key("P-256").as_dict(private=False)), id="public"),
        pytest.param(json.dumps({**RFC_JWK, "d": "not-the-private-key"}), id="bad-d"),
        pytest.param(json.dumps({**RFC_JWK, "d": 7}), id="number-d"),
        pytest.param(json.dumps({"kty": "oct", "k": "c2VjcmV0"}), id="oct"),
        pytest.param("[]", id="array"),
        pytest.param("null", id="null"),
        pytest.param("not json", id="not-json"),
        pytest.param("", id="empty"),
        pytest.param("[" * 100_000, id="nested"),
        pytest.param('{"kty":"EC","crv":"P-256","x":"' + "A" * 10_000 + '"}', id="huge"),
    ],
)
def test_load_refuses_anything_but_a_p256_private_jwk(text: str) -> None:
    with pytest.raises(ValueError, match="is not") as refused:
        DPoPKey.load(text)
    assert "not-the-private-key" not in str(refused.value)


def test_load_refuses_a_private_value_that_is_not_the_public_keys() -> None:
    jwk = json.loads(DPoPKey.generate().export())
    other = DPoPKey.generate().public_jwk()
    with pytest.raises(ValueError, match="is not a valid EC P-256 key") as refused:
        DPoPKey.load(json.dumps({**jwk, "x": other["x"], "y": other["y"]}))
    assert jwk["d"] not in str(refused.value)


def test_load_refuses_what_is_not_text() -> None:
    exported = DPoPKey.generate().export()
    with pytest.raises(ValueError, match="is not"):
        DPoPKey.load(exported.encode())  # type: ignore[arg-type]


def test_nothing_private_in_repr_str_or_pickle() -> None:
    key = DPoPKey.generate()
    private = json.loads(key.export())["d"]
    assert repr(key) == str(key) == f"DPoPKey(jkt={key.thumbprint!r})"
    assert private not in repr([key]) + f"{key}" + repr({"k": key})
    with pytest.raises(TypeError, match="export"):
        pickle.dumps(key)
    assert copy.copy(key) is key
    assert copy.deepcopy({"k": key})["k"] is key
    assert not hasattr(key, "__dict__")
    with pytest.raises(ValueError, match="private"):
        DPoPKey(public_key(RFC_JWK))


# -- loaded keys (the per-process cache behind DPoPKey.load) --------------------------------------


def test_a_loaded_key_is_read_once_and_kept_by_its_export() -> None:
    cache = dpop.KeyCache(max_keys=4)
    key, other = DPoPKey.generate(), DPoPKey.generate()
    first = cache.load(key.export())
    assert first == key
    assert first is not key  # read from the text, not the generated object
    assert cache.load(key.export()) is first  # the same export: the same loaded key
    assert len(cache) == 1
    loaded_other = cache.load(other.export())  # a different key: its own entry
    assert loaded_other == other
    assert loaded_other.thumbprint != first.thumbprint
    assert len(cache) == 2
    cache.clear()
    assert len(cache) == 0
    assert cache.load(key.export()) is not first  # read again after clear


def test_the_key_cache_is_bounded_least_recently_used_out() -> None:
    cache = dpop.KeyCache(max_keys=3)
    texts = [DPoPKey.generate().export() for _ in range(4)]
    loaded = [cache.load(text) for text in texts[:3]]
    assert cache.load(texts[0]) is loaded[0]  # used: texts[1] is now the oldest
    cache.load(texts[3])
    assert len(cache) == 3
    assert cache.load(texts[0]) is loaded[0]
    assert cache.load(texts[2]) is loaded[2]
    assert cache.load(texts[1]) is not loaded[1]  # it was dropped, and is read anew
    assert len(cache) == 3
    with pytest.raises(ValueError, match="max_keys"):
        dpop.KeyCache(max_keys=0)


def test_the_process_cache_serves_dpop_key_load_and_holds_at_most_256_keys() -> None:
    assert dpop.loaded_keys.max_keys == 256
    text = DPoPKey.generate().export()
    assert DPoPKey.load(text) is DPoPKey.load(text) is dpop.loaded_keys.load(text)
    for _ in range(300):
        DPoPKey.load(DPoPKey.generate().export())
    assert len(dpop.loaded_keys) == 256


@pytest.mark.parametrize(
    "text", ["{", '{"kty":"EC"}', "\ud800\udfff not json", "x" * 5000, "", " "]
)
def test_what_does_not_load_is_never_kept(text: str) -> None:
    cache = dpop.KeyCache()
    with pytest.raises(ValueError, match="is not") as refused:
        cache.load(text)
    assert len(cache) == 0
    assert text.strip() == "" or text[:20] not in str(refused.value)
    with pytest.raises(ValueError, match="is not"):
        cache.load(b"{}")  # type: ignore[arg-type]
    assert len(cache) == 0


def test_a_key_whose_export_differs_by_one_member_is_not_the_cached_one() -> None:
    cache = dpop.KeyCache()
    jwk = json.loads(DPoPKey.generate().export())
    cache.load(json.dumps(jwk))
    other = json.loads(DPoPKey.generate().export())
    with pytest.raises(ValueError, match="valid"):  # d of one key, x and y of the other
        cache.load(json.dumps({**jwk, "d": other["d"]}))
    assert len(cache) == 1


def test_no_private_key_in_the_key_caches_repr() -> None:
    cache = dpop.KeyCache(max_keys=8)
    keys = [cache.load(DPoPKey.generate().export()) for _ in range(3)]
    shown = f"{cache!r}{cache!s}{[cache]!r}"
    assert shown.startswith("KeyCache(keys=3, max_keys=8)")
    for key in keys:
        exported = json.loads(key.export())
        assert exported["d"] not in shown
        assert key.thumbprint not in shown  # not even which identities were loaded
    with pytest.raises(TypeError):
        pickle.dumps(cache)  # its lock; and each key refuses


def test_the_key_cache_is_thread_safe() -> None:
    cache = dpop.KeyCache(max_keys=5)
    texts = [DPoPKey.generate().export() for _ in range(8)]

    def work(worker: int) -> None:
        for n in range(300):
            text = texts[(worker * 3 + n) % len(texts)]
            assert cache.load(text).export() == text

    in_threads(work, 8)
    assert len(cache) == 5


# -- proofs ----------------------------------------------------------------------------------------


def test_a_proof_verifies_as_a_server_checks_it() -> None:
    key = DPoPKey.generate()
    before = int(time.time())
    proof = dpop.proof(key, "post", "https://as.example/token")
    header, claims = verify(proof)
    assert header["jwk"] == key.public_jwk()
    assert ECKey.import_key(header["jwk"]).thumbprint() == key.thumbprint
    assert set(claims) == {"jti", "htm", "htu", "iat"}
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://as.example/token"
    assert before <= claims["iat"] <= int(time.time())
    assert isinstance(claims["iat"], int)
    assert len(base64.urlsafe_b64decode(claims["jti"] + "==")) >= 16  # 128 bits


def test_a_proof_with_nonce_access_token_and_clock() -> None:
    key = DPoPKey.generate()
    proof = dpop.proof(
        key,
        "GET",
        "https://rs.example/protectedresource",
        nonce=RFC_NONCE,
        access_token=RFC_ACCESS_TOKEN,
        now=1562262618.9,
    )
    _, claims = verify(proof)
    assert claims["nonce"] == RFC_NONCE
    assert claims["ath"] == RFC_ATH == b64url_sha256(RFC_ACCESS_TOKEN)
    assert claims["iat"] == 1562262618
    assert claims["htm"] == "GET"


def test_proofs_of_one_key_share_its_header_unchanged() -> None:
    key = DPoPKey.load(DPoPKey.generate().export())
    headers = [verify(dpop.proof(key, "GET", "https://rs.example/"))[0] for _ in range(3)]
    expected = {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.public_jwk()}
    assert headers == [expected] * 3
    assert key._header == expected


def test_every_proof_has_its_own_jti() -> None:
    key = DPoPKey.generate()
    jtis = {verify(dpop.proof(key, "GET", "https://rs.example/"))[1]["jti"] for _ in range(1000)}
    assert len(jtis) == 1000


@pytest.mark.parametrize(
    ("url", "htu"),
    [
        ("https://server.example.com/token", "https://server.example.com/token"),
        ("HTTPS://Server.Example.COM/Token", "https://server.example.com/Token"),
        ("https://server.example.com/token?code=abc&x=1", "https://server.example.com/token"),
        ("https://server.example.com/token#frag", "https://server.example.com/token"),
        ("https://server.example.com/a?b#c", "https://server.example.com/a"),
        ("https://server.example.com", "https://server.example.com/"),
        ("https://server.example.com?q", "https://server.example.com/"),
        ("https://server.example.com:443/t", "https://server.example.com/t"),
        ("http://server.example.com:80/t", "http://server.example.com/t"),
        ("https://server.example.com:8443/t", "https://server.example.com:8443/t"),
        ("http://127.0.0.1:5000/me", "http://127.0.0.1:5000/me"),
        ("http://[::1]:8080/me", "http://[::1]:8080/me"),
        ("https://[2001:DB8::1]/me", "https://[2001:db8::1]/me"),
        ("https://user:pw@server.example.com/t", "https://server.example.com/t"),
        ("https://server.example.com/a%2Fb/%7Euser/", "https://server.example.com/a%2Fb/%7Euser/"),
        ("https://server.example.com/x/../y", "https://server.example.com/x/../y"),
    ],
)
def test_htu_is_the_target_without_query_and_fragment(url: str, htu: str) -> None:
    assert dpop.target_uri(url) == htu
    _, claims = verify(dpop.proof(DPoPKey.generate(), "GET", url))
    assert claims["htu"] == htu


@pytest.mark.parametrize(
    "url",
    ["/token", "ftp://server.example.com/", "https:///token", "server.example.com/t", ""],
)
def test_a_proof_needs_an_absolute_http_url(url: str) -> None:
    with pytest.raises(ValueError, match="absolute"):
        dpop.proof(DPoPKey.generate(), "GET", url)


def test_a_proof_refuses_bad_methods_nonces_and_tokens() -> None:
    key = DPoPKey.generate()
    url = "https://rs.example/"
    for method in ("", "GE T", "GET\r\n", "GÉT"):
        with pytest.raises(ValueError, match="method"):
            dpop.proof(key, method, url)
    for nonce in ("", 'a"b', "a b", "x" * (dpop.MAX_NONCE_LENGTH + 1)):
        with pytest.raises(ValueError, match="nonce"):
            dpop.proof(key, "GET", url, nonce=nonce)
    with pytest.raises(ValueError, match="ascii"):
        dpop.proof(key, "GET", url, access_token="tökén")
    for url in ("https://rs.example:99999/", "https://rs.example:x/", "https://[::1/"):
        with pytest.raises(ValueError, match="bad host or port"):
            dpop.proof(key, "GET", url)


# -- nonces ----------------------------------------------------------------------------------------


def test_nonces_are_kept_per_origin() -> None:
    store = NonceStore()
    assert store.get("https://as.example/token") is None
    store.remember("https://as.example/par?x=1", "n1")
    assert store.get("https://as.example/token") == "n1"
    assert store.get("HTTPS://AS.example:443/revoke") == "n1"
    assert store.get("https://as.example:8443/token") is None
    assert store.get("http://as.example/token") is None
    assert store.get("https://rs.example/me") is None
    store.remember("https://as.example/token", "n2")  # the newest wins
    assert store.get("https://as.example/par") == "n2"
    store.remember("https://as.example/token", None)  # no new nonce: the last one stays
    assert store.get("https://as.example/par") == "n2"
    store.clear()
    assert store.get("https://as.example/par") is None
    assert len(store) == 0


@pytest.mark.parametrize(
    "nonce", ["", " ", 'quo"te', "back\\slash", "sp ace", "t\tab", "é", "x" * 513, "\x00"]
)
def test_an_odd_nonce_is_ignored(nonce: str) -> None:
    store = NonceStore()
    store.remember("https://as.example/", "good")
    store.remember("https://as.example/", nonce)
    assert store.get("https://as.example/") == "good"
    assert dpop.new_nonce({"DPoP-Nonce": nonce}) is None


def test_a_malformed_url_is_ignored() -> None:
    store = NonceStore()
    store.remember("not a url", "n")
    store.remember("https://as.example:bad/", "n")
    assert len(store) == 0
    assert store.get("not a url") is None
    assert store.get("https://as.example:bad/") is None


def test_the_store_is_bounded_least_recently_used_out() -> None:
    store = NonceStore(max_servers=3)
    for n in range(3):
        store.remember(f"https://s{n}.example/", f"n{n}")
    assert store.get("https://s0.example/") == "n0"  # s0 used: s1 is now the oldest
    store.remember("https://s3.example/", "n3")
    assert len(store) == 3
    assert store.get("https://s1.example/") is None
    assert [store.get(f"https://s{n}.example/") for n in (0, 2, 3)] == ["n0", "n2", "n3"]
    assert repr(store) == "NonceStore(servers=3, max_servers=3)"
    with pytest.raises(ValueError, match="max_servers"):
        NonceStore(max_servers=0)


def test_the_default_store_is_bounded_at_1024_servers() -> None:
    store = NonceStore()
    for n in range(1500):
        store.remember(f"https://s{n}.example/", "n")
    assert len(store) == 1024 == dpop.nonces.max_servers
    assert store.get("https://s1499.example/") == "n"
    assert store.get("https://s0.example/") is None


def test_the_store_is_thread_safe() -> None:
    store = NonceStore(max_servers=50)

    def work(worker: int) -> None:
        for n in range(2000):
            url = f"https://s{(worker * 7 + n) % 80}.example/"
            store.remember(url, f"n{n}")
            store.get(url)

    in_threads(work, 8)
    assert len(store) == 50


def test_new_nonce_reads_the_header_whatever_its_case() -> None:
    assert dpop.new_nonce({"DPoP-Nonce": RFC_NONCE}) == RFC_NONCE
    assert dpop.new_nonce({"dpop-nonce": f" {RFC_NONCE}\t"}) == RFC_NONCE
    assert dpop.new_nonce(requests.structures.CaseInsensitiveDict({"DPOP-NONCE": "n"})) == "n"
    assert dpop.new_nonce({"Content-Type": "application/json"}) is None


# -- answers that ask for a nonce ------------------------------------------------------------------

#: RFC 9449 8, Figure 20: an authorization server asks for a nonce.
AS_BODY = (
    b'{\n "error": "use_dpop_nonce",\n "error_description":\n'
    b'   "Authorization server requires nonce in DPoP proof"\n}'
)
#: RFC 9449 9, Figure 22: a resource server asks for a nonce (the header's folded lines joined).
RS_CHALLENGE = (
    'DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"'
)


def test_an_authorization_server_asks_with_a_400_json_answer() -> None:
    headers = {"DPoP-Nonce": RFC_NONCE, "Content-Type": "application/json"}
    assert dpop.nonce_requested(400, headers, AS_BODY)
    assert dpop.new_nonce(headers) == RFC_NONCE
    assert not dpop.nonce_requested(400, headers, b'{"error": "invalid_dpop_proof"}')
    assert not dpop.nonce_requested(400, headers, b'{"error": "invalid_grant"}')
    assert not dpop.nonce_requested(400, headers, b'{"error_description": "use_dpop_nonce"}')
    assert not dpop.nonce_requested(400, headers, b'["use_dpop_nonce"]')
    assert not dpop.nonce_requested(400, headers, b'{"error": ["use_dpop_nonce"]}')
    assert not dpop.nonce_requested(200, headers, AS_BODY)
    assert not dpop.nonce_requested(401, headers, AS_BODY)  # a 401 asks in its challenge
    assert not dpop.nonce_requested(500, headers, AS_BODY)


@pytest.mark.parametrize(
    "challenge",
    [
        RS_CHALLENGE,
        'DPoP error="use_dpop_nonce"',
        "DPoP error=use_dpop_nonce",
        'dpop ERROR = "use_dpop_nonce"',
        'DPoP algs="ES256 PS256", error="use_dpop_nonce"',
        'Bearer realm="api", DPoP algs="ES256", error="use_dpop_nonce"',
        'Bearer, DPoP error="use_dpop_nonce"',
        'Basic YWxhZGRpbjpvcGVuc2VzYW1l==, DPoP error="use_dpop_nonce"',
        'Bearer error="invalid_token", DPoP error="use_dpop_nonce"',
        'DPoP realm="a, b \\"c\\"", error="use_dpop_nonce"',
        'DPoP error="use_dpop_nonce", Bearer realm="x"',
    ],
)
def test_a_resource_server_asks_with_a_401_dpop_challenge(challenge: str) -> None:
    headers = {"WWW-Authenticate": challenge, "DPoP-Nonce": RFC_NONCE}
    assert dpop.nonce_requested(401, headers, b"")
    assert dpop.nonce_requested(401, {"www-authenticate": challenge}, b"")


@pytest.mark.parametrize(
    "challenge",
    [
        'DPoP algs="ES256 PS256"',  # RFC 9449 7.1: a proof is needed, not a nonce
        'Bearer, DPoP algs="ES256 PS256"',  # RFC 9449 7.2
        'DPoP error="invalid_token"',
        'Bearer error="use_dpop_nonce"',  # not the DPoP scheme
        'DPoP error="invalid_token", Bearer error="use_dpop_nonce"',
        'DPoP error_description="use_dpop_nonce"',
        'DPoP realm="error=\\"use_dpop_nonce\\""',  # inside another parameter's value
        'DPoPX error="use_dpop_nonce"',
        'DPoP error="use_dpop_nonce_not"',
        'DPoP error="use_dpop_nonce',  # unterminated
        "",
        ",,,",
        '="use_dpop_nonce"',
    ],
)
def test_other_challenges_do_not_ask_for_a_nonce(challenge: str) -> None:
    assert not dpop.nonce_requested(401, {"WWW-Authenticate": challenge}, b"")


def test_challenges_are_parsed_as_rfc_9110_writes_them() -> None:
    assert www_authenticate.challenges(
        'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"'
    ) == [
        ("newauth", {"realm": "apps", "type": "1", "title": 'Login to "apps"'}),
        ("basic", {"realm": "simple"}),
    ]
    assert www_authenticate.challenges(
        'Bearer, DPoP algs="ES256 PS256", Negotiate abc+/== ,Foo'
    ) == [
        ("bearer", {}),
        ("dpop", {"algs": "ES256 PS256"}),
        ("negotiate", {}),
        ("foo", {}),
    ]


def test_a_401_without_a_challenge_or_with_a_huge_one_does_not_ask() -> None:
    assert not dpop.nonce_requested(401, {}, AS_BODY)
    huge = 'DPoP realm="' + "x" * 100_000 + '", error="use_dpop_nonce"'
    assert not dpop.nonce_requested(401, {"WWW-Authenticate": huge}, b"")


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"use_dpop_nonce",
        b"\xff\xfe use_dpop_nonce \x00",
        b'{"error": "use_dpop_nonce"' + b" " * 20_000 + b"}",
        b"[" * 200_000 + b'"use_dpop_nonce"' + b"]" * 200_000,
        b'{"a":' * 5_000 + b'{"error": "use_dpop_nonce"}' + b"}" * 5_000,
        b'{"error": "use_dpop_nonce"',
        b"<html>use_dpop_nonce</html>",
    ],
)
def test_garbage_bodies_never_ask(body: bytes) -> None:
    assert not dpop.nonce_requested(400, {}, body)


@given(
    status=st.sampled_from([200, 400, 401, 403, 500]) | st.integers(),
    headers=st.dictionaries(
        st.sampled_from(["WWW-Authenticate", "www-authenticate", "DPoP-Nonce", "X"]) | st.text(),
        st.text()
        | st.sampled_from(['DPoP error="use_dpop_nonce"', RS_CHALLENGE])
        | st.lists(
            st.sampled_from(["DPoP", " ", '"', ",", "=", "\\", "error", "use_dpop_nonce"])
        ).map("".join),
    ),
    body=st.binary()
    | st.sampled_from([AS_BODY, b"[" * 50_000])
    | st.recursive(
        st.none() | st.text() | st.just("use_dpop_nonce"),
        lambda inner: st.lists(inner) | st.dictionaries(st.sampled_from(["error", "x"]), inner),
    ).map(lambda document: json.dumps(document).encode()),
)
def test_nonce_requested_and_new_nonce_never_raise(
    status: int, headers: dict[str, str], body: bytes
) -> None:
    assert isinstance(dpop.nonce_requested(status, headers, body), bool)
    nonce = dpop.new_nonce(headers)
    assert nonce is None or dpop.is_valid_nonce(nonce)


# -- against panva's certified oidc-provider ---------------------------------------------------

REDIRECT_URI = "http://127.0.0.1:5000/callback"
CLIENT_SECRET = "a-client-secret-of-at-least-thirty-two-bytes"
CLIENT: dict[str, Any] = {
    "client_id": "app",
    "client_secret": CLIENT_SECRET,
    "token_endpoint_auth_method": "client_secret_post",
    "redirect_uris": [REDIRECT_URI],
    "dpop_bound_access_tokens": True,
}
AUTHENTICATION: dict[str, str] = {"client_id": "app", "client_secret": CLIENT_SECRET}


class DPoPClient:
    """Requests with proofs from :mod:`flask_social_oauth2.oauth.dpop`, retried once on
    ``use_dpop_nonce``, as the integration is to make them."""

    def __init__(self, key: DPoPKey, store: NonceStore) -> None:
        self.key = key
        self.store = store

    def send(
        self,
        method: str,
        url: str,
        *,
        data: Mapping[str, str] | None = None,
        access_token: str | None = None,
    ) -> tuple[requests.Response, int]:
        for attempt in (1, 2):
            nonce = self.store.get(url)
            proof = dpop.proof(self.key, method, url, nonce=nonce, access_token=access_token)
            headers = {"DPoP": proof}
            if access_token is not None:
                headers["Authorization"] = f"DPoP {access_token}"
            answer = requests.request(method, url, data=data, headers=headers, timeout=5)
            self.store.remember(url, dpop.new_nonce(answer.headers))
            if attempt == 1 and dpop.nonce_requested(
                answer.status_code, answer.headers, answer.content
            ):
                continue
            return answer, attempt
        raise AssertionError("unreachable")


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, b64url_sha256(verifier)


def test_a_par_and_dpop_sign_in_at_oidc_provider(oidc_provider_factory: Factory) -> None:
    server = oidc_provider_factory([CLIENT])
    metadata = server.metadata()
    key = DPoPKey.generate()
    client = DPoPClient(key, NonceStore())
    verifier, challenge = _pkce()
    state = secrets.token_urlsafe(16)
    parameters = {
        **AUTHENTICATION,
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": "openid profile",
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }

    # PAR: the first proof has no nonce; the server asks for one (400 JSON) and takes the retry
    pushed, attempts = client.send(
        "POST", metadata["pushed_authorization_request_endpoint"], data=parameters
    )
    assert (pushed.status_code, attempts) == (201, 2), pushed.text
    front = (
        server.url("/auth")
        + "?"
        + urlencode({"client_id": CLIENT["client_id"], "request_uri": pushed.json()["request_uri"]})
    )
    callback = parse_qs(urlsplit(server.authorize(front, REDIRECT_URI)).query)
    assert callback["state"] == [state]

    # token: the nonce remembered for the server's origin passes the first time
    token_request = {
        **AUTHENTICATION,
        "grant_type": "authorization_code",
        "code": callback["code"][0],
        "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier,
    }
    answer, attempts = client.send("POST", metadata["token_endpoint"], data=token_request)
    assert (answer.status_code, attempts) == (200, 1), answer.text
    tokens = answer.json()
    assert tokens["token_type"] == "DPoP"

    # userinfo with the bound token, a nonce and ``ath``
    userinfo, attempts = client.send(
        "GET", metadata["userinfo_endpoint"], access_token=tokens["access_token"]
    )
    assert (userinfo.status_code, attempts) == (200, 1), userinfo.text
    assert userinfo.json()["sub"] == "alice"

    # without the nonce, the resource server asks with a 401 challenge; the retry passes
    forgetful = DPoPClient(key, NonceStore())
    userinfo, attempts = forgetful.send(
        "GET", metadata["userinfo_endpoint"] + "?unused=1", access_token=tokens["access_token"]
    )
    assert (userinfo.status_code, attempts) == (200, 2), userinfo.text
    log = server.log()
    asked = [e for e in log if e["route"] == "userinfo" and e["status"] == 401]
    assert len(asked) == 1
    assert 'error="use_dpop_nonce"' in asked[0]["www_authenticate"]
    # every proof the server saw was fresh, bound to the key, and named the address without query
    proofs = [e for e in log if e["dpop"]]
    assert len({e["dpop_jti"] for e in proofs}) == len(proofs) == 6
    assert all(e["dpop_htu"] == metadata["userinfo_endpoint"] for e in proofs[-3:])
    assert [e["dpop_ath"] is not None for e in proofs] == [False] * 3 + [True] * 3

    # a nonce that changes mid-session: asked again once, then accepted
    server.rotate_dpop_nonce()
    userinfo, attempts = client.send(
        "GET", metadata["userinfo_endpoint"], access_token=tokens["access_token"]
    )
    assert (userinfo.status_code, attempts) == (200, 2), userinfo.text

    # another key's proofs do not open the bound token
    thief = DPoPClient(DPoPKey.generate(), client.store)
    stolen, _ = thief.send(
        "GET", metadata["userinfo_endpoint"], access_token=tokens["access_token"]
    )
    assert stolen.status_code == 401


def test_send_with_nonce_retries_once_with_the_nonce_the_server_asked_for() -> None:
    store = dpop.NonceStore()
    sent: list[str | None] = []
    answers = [
        (400, {"DPoP-Nonce": "n-1"}, b'{"error": "use_dpop_nonce"}'),
        (400, {"DPoP-Nonce": "n-2"}, b'{"error": "use_dpop_nonce"}'),
    ]

    def send(nonce: str | None) -> tuple[int, dict[str, str], bytes]:
        sent.append(nonce)
        return answers[len(sent) - 1]

    last = dpop.send_with_nonce("https://as.example/token?x=1", send, lambda a: a, store)
    assert sent == [None, "n-1"]  # one retry only, even when asked again
    assert last == answers[1]
    assert store.get("https://as.example/par") == "n-2"  # per server, the newest
    sent.clear()
    answers[:] = [(200, {}, b"{}")]
    dpop.send_with_nonce("https://as.example/token", send, lambda a: a, store)
    assert sent == ["n-2"]
