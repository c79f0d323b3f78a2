"""AT Protocol identity resolution (flask_social_oauth2.atproto): against the reference PDS and
PLC directory on loopback, and against hostile servers (tests/fault_server.py) that point at
private addresses, lie about identities, redirect, drip, flood or hang. Every failure is a
typed ResolutionError (InvalidIdentifierError, 400, for the user's input)."""

from __future__ import annotations

import functools
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from atproto_server import AtprotoServer
from fault_server import DNS_FAILURE_URL, Behaviour, FaultServer
from hypothesis import given
from hypothesis import strategies as st

from flask_social_oauth2.atproto import (
    GuardedFetcher,
    authorization_server_metadata,
    is_did,
    normalize_did,
    normalize_handle,
    parse_did_document,
    protected_resource_issuer,
    resolve,
    resolve_did,
    resolve_handle,
    verify_handle,
)
from flask_social_oauth2.atproto.addresses import is_loopback_address, is_public_address
from flask_social_oauth2.errors import (
    AccountNotFoundError,
    AuthenticationError,
    InvalidIdentifierError,
    ResolutionError,
)

DID = "did:plc:abcdefghijklmnopqrstuvwx"
HANDLE = "carol.test"
RESOLVE_PATH = "/xrpc/com.atproto.identity.resolveHandle"


@pytest.fixture
def tls_server() -> Iterator[FaultServer]:
    """A FaultServer on https (a self-signed certificate for localhost and 127.0.0.1)."""
    with FaultServer(tls=True) as server:
        yield server


def trusting(server: FaultServer) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=server.cert_file)


def dns(*addresses: str, calls: list[str] | None = None) -> Callable[..., list[tuple[Any, ...]]]:
    """A getaddrinfo that answers ``addresses`` for every name (and records the names)."""

    def lookup(host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        if calls is not None:
            calls.append(host)
        answers: list[tuple[Any, ...]] = []
        for address in addresses:
            if ":" in address:
                answers.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0)))
            else:
                answers.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)))
        return answers

    return lookup


def fails(reason: str, call: Callable[[], object], status: int = 502) -> ResolutionError:
    """``call`` raises a ResolutionError of ``reason`` and ``status``; returns it."""
    with pytest.raises(ResolutionError) as caught:
        call()
    assert caught.value.reason == reason, caught.value
    assert caught.value.status_code == status, caught.value
    assert isinstance(caught.value, AuthenticationError)
    return caught.value


def did_document(
    did: str = DID,
    handle: str = HANDLE,
    pds: str = "https://pds.example.com",
    **changes: Any,
) -> dict[str, Any]:
    return {
        "@context": ["https://www.w3.org/ns/did/v1"],
        "id": did,
        "alsoKnownAs": [f"at://{handle}"],
        "verificationMethod": [],
        "service": [
            {"id": "#atproto_pds", "type": "AtprotoPersonalDataServer", "serviceEndpoint": pds}
        ],
        **changes,
    }


def server_metadata(issuer: str, /, **changes: Any) -> dict[str, Any]:
    document = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/oauth/authorize",
        "token_endpoint": f"{issuer}/oauth/token",
        "pushed_authorization_request_endpoint": f"{issuer}/oauth/par",
        "require_pushed_authorization_requests": True,
        "code_challenge_methods_supported": ["S256"],
        "dpop_signing_alg_values_supported": ["ES256"],
        "authorization_response_iss_parameter_supported": True,
        "token_endpoint_auth_methods_supported": ["none", "private_key_jwt"],
        "scopes_supported": ["atproto", "transition:generic"],
    }
    document.update(changes)
    return {name: value for name, value in document.items() if value is not None}


@dataclass
class FakeNetwork:
    """One FaultServer playing resolver, PLC directory, PDS and authorization server."""

    server: FaultServer

    @property
    def url(self) -> str:
        return self.server.url

    def serve(
        self,
        *,
        document: dict[str, Any] | None = None,
        resource: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        url = self.server.url
        self.server.set(RESOLVE_PATH, Behaviour.json({"did": DID}))
        self.server.set(f"/{DID}", Behaviour.json(document or did_document(pds=url)))
        self.server.set(
            "/.well-known/oauth-protected-resource",
            Behaviour.json(resource or {"resource": url, "authorization_servers": [url]}),
        )
        self.server.set(
            "/.well-known/oauth-authorization-server",
            Behaviour.json(metadata or server_metadata(url)),
        )

    def resolve(self, text: str = HANDLE) -> Any:
        return resolve(text, resolver_url=self.url, plc_url=self.url, allow_loopback=True)


@pytest.fixture
def network(fault_server: FaultServer) -> FakeNetwork:
    fake = FakeNetwork(fault_server)
    fake.serve()
    return fake


# -- the reference servers -------------------------------------------------------------------


@pytest.mark.atproto
def test_alice_resolves_to_her_did_pds_and_authorization_server(
    atproto_server: AtprotoServer,
) -> None:
    pds = atproto_server.pds_url
    found = resolve(
        "alice.test", resolver_url=pds, plc_url=atproto_server.plc_url, allow_loopback=True
    )
    assert found.did == atproto_server.accounts["alice.test"].did
    assert found.handle == "alice.test"
    assert found.pds == pds
    assert found.issuer == pds
    assert found.metadata.issuer == pds
    assert found.metadata.pushed_authorization_request_endpoint == f"{pds}/oauth/par"
    assert found.metadata.authorization_endpoint == f"{pds}/oauth/authorize"
    assert found.metadata.token_endpoint == f"{pds}/oauth/token"
    assert found.metadata.revocation_endpoint == f"{pds}/oauth/revoke"
    assert "ES256" in found.metadata.dpop_signing_alg_values_supported
    assert "private_key_jwt" in found.metadata.token_endpoint_auth_methods_supported
    assert "atproto" in found.metadata.scopes_supported
    # as people type it
    again = resolve(
        "  @Alice.TEST ", resolver_url=pds, plc_url=atproto_server.plc_url, allow_loopback=True
    )
    assert again == found


@pytest.mark.atproto
def test_a_did_resolves_to_its_verified_handle(atproto_server: AtprotoServer) -> None:
    alice = atproto_server.accounts["alice.test"]
    found = resolve(
        alice.did,
        resolver_url=atproto_server.pds_url,
        plc_url=atproto_server.plc_url,
        allow_loopback=True,
    )
    assert (found.did, found.handle, found.pds) == (alice.did, "alice.test", atproto_server.pds_url)


@pytest.mark.atproto
def test_bob_resolves_to_bob(atproto_server: AtprotoServer) -> None:
    found = resolve(
        "bob.test",
        resolver_url=atproto_server.pds_url,
        plc_url=atproto_server.plc_url,
        allow_loopback=True,
    )
    assert found.did == atproto_server.accounts["bob.test"].did
    assert found.did != atproto_server.accounts["alice.test"].did
    assert found.handle == "bob.test"


@pytest.mark.atproto
def test_the_steps_one_by_one_against_the_reference_servers(
    atproto_server: AtprotoServer,
) -> None:
    fetch = GuardedFetcher(allow_loopback=True)
    pds, plc = atproto_server.pds_url, atproto_server.plc_url
    did = resolve_handle("alice.test", fetch=fetch, resolver_url=pds)
    document = resolve_did(did, fetch=fetch, plc_url=plc)
    assert document.handles == ("alice.test",)
    verify_handle("alice.test", document)
    fails("handle_mismatch", lambda: verify_handle("bob.test", document))
    assert protected_resource_issuer(pds, fetch=fetch) == pds
    assert authorization_server_metadata(pds, fetch=fetch).token_endpoint == f"{pds}/oauth/token"


@pytest.mark.atproto
def test_unknown_handles_and_dids_are_typed_errors(atproto_server: AtprotoServer) -> None:
    fetch = GuardedFetcher(allow_loopback=True)
    error = fails(
        "handle_not_found",
        lambda: resolve_handle("nobody.test", fetch=fetch, resolver_url=atproto_server.pds_url),
        status=400,
    )
    assert isinstance(error, AccountNotFoundError)
    unknown = fails(
        "did_not_found",
        lambda: resolve_did(
            "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", fetch=fetch, plc_url=atproto_server.plc_url
        ),
        status=400,
    )
    assert isinstance(unknown, AccountNotFoundError)
    assert unknown.http_status == 404  # the reference PLC directory's answer


@pytest.mark.atproto
def test_the_reference_servers_are_refused_without_allow_loopback(
    atproto_server: AtprotoServer,
) -> None:
    fetch = GuardedFetcher()
    fails(
        "insecure_url",
        lambda: fetch.json(f"{atproto_server.pds_url}/.well-known/oauth-protected-resource"),
    )
    with pytest.raises(InvalidIdentifierError):  # .test is a test name
        resolve("alice.test", resolver_url=atproto_server.pds_url, plc_url=atproto_server.plc_url)


# -- the chain, against servers that lie ------------------------------------------------------


def test_the_whole_chain_on_a_fake_network(network: FakeNetwork) -> None:
    found = network.resolve()
    assert (found.did, found.handle, found.pds, found.issuer) == (
        DID,
        HANDLE,
        network.url,
        network.url,
    )
    assert network.resolve(DID).handle == HANDLE


def test_a_document_for_another_did_is_refused(network: FakeNetwork) -> None:
    other = "did:plc:zzzzzzzzzzzzzzzzzzzzzzzz"
    network.serve(document=did_document(did=other, pds=network.url))
    fails("did_mismatch", network.resolve)
    fails("did_mismatch", lambda: network.resolve(DID))


def test_a_document_that_does_not_name_the_handle_is_refused(network: FakeNetwork) -> None:
    """Anyone can point a handle at someone's DID: the document must name it back."""
    network.serve(document=did_document(handle="someone-else.test", pds=network.url))
    fails("handle_mismatch", network.resolve)
    network.serve(document=did_document(pds=network.url, alsoKnownAs=[]))
    fails("handle_mismatch", network.resolve)


def test_a_did_whose_handle_does_not_resolve_back_has_no_handle(network: FakeNetwork) -> None:
    network.server.set(RESOLVE_PATH, Behaviour.json({"did": "did:plc:zzzzzzzzzzzzzzzzzzzzzzzz"}))
    found = network.resolve(DID)
    assert found.did == DID
    assert found.handle is None
    network.server.set(RESOLVE_PATH, Behaviour.json({"error": "HandleNotFound"}, status=400))
    assert network.resolve(DID).handle is None


@pytest.mark.parametrize(
    ("pds", "reason"),
    [
        ("http://pds.example.com", "insecure_url"),
        ("http://10.0.0.1", "insecure_url"),
        ("ftp://pds.example.com", "bad_url"),
        ("https://pds.example.com/xrpc", "bad_url"),
        ("https://pds.example.com?x=1", "bad_url"),
        ("https://user@pds.example.com", "bad_url"),
        ("https://pds.example.com#x", "bad_url"),
        ("https://pdś.example.com", "bad_url"),
        (42, "bad_url"),
    ],
)
def test_a_pds_that_is_not_an_https_origin_is_refused(
    network: FakeNetwork, pds: object, reason: str
) -> None:
    network.serve(document=did_document(pds=pds))  # type: ignore[arg-type]
    fails(reason, network.resolve)


def test_a_document_without_a_pds_is_refused(network: FakeNetwork) -> None:
    network.serve(document=did_document(service=[]))
    fails("no_pds", network.resolve)
    wrong_type = [{"id": "#atproto_pds", "type": "Other", "serviceEndpoint": network.url}]
    network.serve(document=did_document(service=wrong_type))
    fails("no_pds", network.resolve)


@pytest.mark.parametrize(
    "changes",
    [{"alsoKnownAs": "at://carol.test"}, {"service": {"id": "#atproto_pds"}}],
)
def test_a_malformed_document_is_refused(network: FakeNetwork, changes: dict[str, Any]) -> None:
    network.serve(document=did_document(pds=network.url, **changes))
    fails("bad_document", network.resolve)


def test_the_document_parser_keeps_only_valid_handles() -> None:
    document = parse_did_document(
        did_document(
            alsoKnownAs=["https://x.example.com", "at://Carol.Example.com", "at://bad", 7],
            service=[
                "junk",
                {
                    "id": f"{DID}#atproto_pds",
                    "type": "AtprotoPersonalDataServer",
                    "serviceEndpoint": "https://PDS.example.com/",
                },
            ],
        ),
        DID,
    )
    assert document.handles == ("carol.example.com",)
    assert document.pds == "https://pds.example.com"


def test_a_resolver_answering_no_did_is_refused(network: FakeNetwork) -> None:
    for answer in ({}, {"did": 7}, {"did": "did:key:z6Mk"}, {"did": "did:web:127.0.0.1"}):
        network.server.set(RESOLVE_PATH, Behaviour.json(answer))
        fails("bad_did", network.resolve)


def test_a_resolver_that_fails_is_a_502(network: FakeNetwork) -> None:
    network.server.set(RESOLVE_PATH, Behaviour.json({"error": "InternalError"}, status=500))
    error = fails("http_status", network.resolve)
    assert error.http_status == 500


@pytest.mark.parametrize(
    ("resource", "reason"),
    [
        (
            {"resource": "https://other.example.com", "authorization_servers": []},
            "resource_mismatch",
        ),
        ({"authorization_servers": ["https://as.example.com"]}, "resource_mismatch"),
        ({"resource": "{url}", "authorization_servers": []}, "no_issuer"),
        ({"resource": "{url}", "authorization_servers": "https://as.example.com"}, "no_issuer"),
        ({"resource": "{url}", "authorization_servers": ["http://as.example.com"]}, "insecure_url"),
        ({"resource": "{url}", "authorization_servers": ["https://as.example.com/x"]}, "bad_url"),
    ],
)
def test_protected_resource_metadata_that_lies_is_refused(
    network: FakeNetwork, resource: dict[str, Any], reason: str
) -> None:
    filled = json.loads(json.dumps(resource).replace("{url}", network.url))
    network.serve(resource=filled)
    fails(reason, network.resolve)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"issuer": "https://evil.example.com"}, "issuer_mismatch"),
        ({"issuer": "{url}/"}, "issuer_mismatch"),
        ({"pushed_authorization_request_endpoint": None}, "bad_metadata"),
        ({"token_endpoint": None}, "bad_metadata"),
        ({"authorization_endpoint": 5}, "bad_metadata"),
        ({"token_endpoint": "http://as.example.com/token"}, "insecure_url"),
        ({"token_endpoint": "not a url"}, "bad_metadata"),
        ({"code_challenge_methods_supported": ["plain"]}, "bad_metadata"),
        ({"dpop_signing_alg_values_supported": ["RS256"]}, "bad_metadata"),
        ({"dpop_signing_alg_values_supported": "ES256"}, "bad_metadata"),
        ({"authorization_response_iss_parameter_supported": None}, "bad_metadata"),
        ({"authorization_response_iss_parameter_supported": "true"}, "bad_metadata"),
        ({"revocation_endpoint": "http://as.example.com/revoke"}, "insecure_url"),
    ],
)
def test_authorization_server_metadata_that_falls_short_is_refused(
    network: FakeNetwork, changes: dict[str, Any], reason: str
) -> None:
    filled = json.loads(json.dumps(changes).replace("{url}", network.url))
    network.serve(metadata=server_metadata(network.url, **filled))
    fails(reason, network.resolve)


# -- the guarded fetch -------------------------------------------------------------------------


def test_loopback_is_refused_without_allow_loopback_and_nothing_reaches_it(
    fault_server: FaultServer, tls_server: FaultServer
) -> None:
    fault_server.set(RESOLVE_PATH, Behaviour.json({"did": DID}))
    tls_server.set("/doc", Behaviour.json({}))
    fails(
        "insecure_url",
        lambda: resolve(
            "carol.example.com", resolver_url=fault_server.url, plc_url=fault_server.url
        ),
    )
    fetch = GuardedFetcher(ssl_context=trusting(tls_server))
    for url in (
        f"{tls_server.url}/doc",
        f"https://localhost:{tls_server.port}/doc",
        f"https://[::ffff:127.0.0.1]:{tls_server.port}/doc",
        f"https://2130706433:{tls_server.port}/doc",  # 127.0.0.1, as inet_aton spells it
        f"https://0x7f.1:{tls_server.port}/doc",
        f"https://0177.0.0.1:{tls_server.port}/doc",
    ):
        fails("refused_address", lambda url=url: fetch.json(url))  # type: ignore[misc]
    # with allow_loopback, http goes only to hosts that are loopback by name
    loose = GuardedFetcher(allow_loopback=True)
    for url in (
        f"http://2130706433:{fault_server.port}/",
        f"http://localhost.example.com:{fault_server.port}/",
        f"http://localhost:80@127.0.0.2:{fault_server.port}/",
    ):
        with pytest.raises(ResolutionError) as caught:
            loose.json(url)
        assert caught.value.reason in ("insecure_url", "bad_url")
    assert fault_server.requests == []
    assert tls_server.requests == []
    assert fault_server.connections_accepted == tls_server.connections_accepted == 0


def test_a_handle_whose_name_resolves_to_a_private_address_is_refused(
    tls_server: FaultServer,
) -> None:
    """Without a resolver, https://<handle>/.well-known/atproto-did: a name that resolves to a
    private address (or to a public and a private one) is never connected to."""
    for addresses in (("127.0.0.1",), ("10.1.2.3",), ("93.184.216.34", "127.0.0.1"), ("::1",)):
        fetch = GuardedFetcher(getaddrinfo=dns(*addresses))
        fails("refused_address", lambda f=fetch: resolve_handle("evil.example.com", fetch=f))  # type: ignore[misc]
        fails(
            "refused_address",
            lambda f=fetch: f.json(f"https://evil.example.com:{tls_server.port}/doc"),  # type: ignore[misc]
        )
    assert tls_server.connections_accepted == 0


def test_the_connection_goes_to_the_address_that_was_checked(tls_server: FaultServer) -> None:
    """DNS is asked once; the connection goes to its (checked) answer, with the URL's host as
    Host header and TLS server name, so a second, rebound answer could never be used."""
    tls_server.set("/doc", Behaviour.json({"ok": True}))
    calls: list[str] = []
    fetch = GuardedFetcher(
        allow_loopback=True,
        ssl_context=trusting(tls_server),
        getaddrinfo=dns("127.0.0.1", calls=calls),
    )
    assert fetch.json(f"https://localhost:{tls_server.port}/doc") == {"ok": True}
    assert calls == ["localhost"]
    (request,) = tls_server.requests
    assert request.headers["Host"] == f"localhost:{tls_server.port}"
    assert request.headers["Accept-Encoding"] == "identity"
    # a name the certificate does not cover fails the TLS check, though the address is fine
    other = GuardedFetcher(
        allow_loopback=True, ssl_context=trusting(tls_server), getaddrinfo=dns("127.0.0.1")
    )
    fails("tls", lambda: other.json(f"https://pds.example.com:{tls_server.port}/doc"))
    # and the system's trust store does not take the self-signed certificate
    fails("tls", lambda: GuardedFetcher(allow_loopback=True).json(f"{tls_server.url}/doc"))


def test_localhost_tries_each_checked_address(fault_server: FaultServer) -> None:
    """localhost may answer ::1 first; the server listens on 127.0.0.1 only."""
    fault_server.set("/doc", Behaviour.json({"ok": 1}))
    fetch = GuardedFetcher(allow_loopback=True, getaddrinfo=dns("::1", "127.0.0.1"))
    assert fetch.json(f"http://localhost:{fault_server.port}/doc") == {"ok": 1}


def test_a_did_web_document_on_loopback(fault_server: FaultServer) -> None:
    did = f"did:web:localhost%3A{fault_server.port}"
    fault_server.set(
        "/.well-known/did.json",
        Behaviour.respond(
            body=json.dumps(did_document(did=did, pds=fault_server.url)),
            content_type="application/did+ld+json",
        ),
    )
    document = resolve_did(did, fetch=GuardedFetcher(allow_loopback=True))
    assert document.pds == fault_server.url
    assert document.handles == (HANDLE,)
    with pytest.raises(InvalidIdentifierError):
        resolve_did(did, fetch=GuardedFetcher())
    assert fault_server.count() == 1


def test_a_redirect_is_not_followed(fault_server: FaultServer) -> None:
    fault_server.set("/moved", Behaviour.respond(302, headers={"Location": "/target"}))
    fault_server.set("/target", Behaviour.json({"did": DID}))
    error = fails(
        "redirect", lambda: GuardedFetcher(allow_loopback=True).json(f"{fault_server.url}/moved")
    )
    assert error.http_status is None
    assert fault_server.count("/target") == 0


@pytest.mark.parametrize(
    "behaviour",
    [
        Behaviour.huge(size=10 * 1024 * 1024),
        Behaviour.huge(size=10 * 1024 * 1024, chunked=True),
        Behaviour.endless_chunked(),
        Behaviour.json({"padding": "x" * 70_000}),
    ],
    ids=["content-length", "chunked", "endless", "just-over"],
)
def test_an_oversized_answer_is_cut_off(fault_server: FaultServer, behaviour: Behaviour) -> None:
    fault_server.set("/big", behaviour)
    began = time.monotonic()
    fails("too_large", lambda: GuardedFetcher(allow_loopback=True).json(f"{fault_server.url}/big"))
    assert time.monotonic() - began < 2


def test_an_answer_just_under_the_cap_is_read(fault_server: FaultServer) -> None:
    fetch = GuardedFetcher(allow_loopback=True, max_bytes=1000)
    body = {"padding": "x" * (1000 - len('{"padding": ""}'))}
    fault_server.set("/doc", Behaviour.json(body))
    assert fetch.json(f"{fault_server.url}/doc") == body


@pytest.mark.parametrize(
    "behaviour",
    [
        Behaviour.hang(),
        Behaviour.delayed(5, Behaviour.json({})),
        Behaviour.drip(b'{"padding": "' + b"x" * 100 + b'"}', interval=0.05),
        Behaviour.endless_chunked(chunk_size=1, interval=0.01),
    ],
    ids=["hang", "delayed", "drip", "endless-drip"],
)
def test_a_slow_answer_is_a_504_within_the_time_cap(
    fault_server: FaultServer, behaviour: Behaviour
) -> None:
    fault_server.set("/slow", behaviour)
    fetch = GuardedFetcher(allow_loopback=True, timeout=0.5)
    began = time.monotonic()
    fails("timeout", lambda: fetch.json(f"{fault_server.url}/slow"), status=504)
    assert time.monotonic() - began < 1.0


def test_a_dripped_tls_handshake_is_a_504_within_the_time_cap() -> None:
    """Each read of the handshake gets a byte in time; the handshake as a whole does not."""
    stop = threading.Event()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def drip() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.sendall(b"\x16\x03\x03\x40\x00")  # a 16 KiB handshake record...
                while not stop.wait(0.05):  # ...that never ends
                    try:
                        connection.sendall(b"\x00")
                    except OSError:
                        return

        worker = threading.Thread(target=drip, daemon=True)
        worker.start()
        fetch = GuardedFetcher(allow_loopback=True, timeout=0.5)
        began = time.monotonic()
        try:
            fails("timeout", lambda: fetch.json(f"https://localhost:{port}/"), status=504)
        finally:
            stop.set()
            worker.join(2)
    assert time.monotonic() - began < 1.0


def test_a_slow_dns_lookup_is_a_504_within_the_time_cap() -> None:
    def slow(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        time.sleep(2)
        return []

    fetch = GuardedFetcher(timeout=0.3, getaddrinfo=slow)
    began = time.monotonic()
    fails("timeout", lambda: fetch.json("https://slow.example.com/"), status=504)
    assert time.monotonic() - began < 0.8


def test_unreachable_and_unresolvable_hosts_are_502s() -> None:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    fails(
        "unreachable", lambda: GuardedFetcher(allow_loopback=True).json(f"http://127.0.0.1:{port}/")
    )
    fails("dns", lambda: GuardedFetcher().json(DNS_FAILURE_URL.replace("http:", "https:")))
    fails("dns", lambda: GuardedFetcher(getaddrinfo=dns()).json("https://nothing.example.com/"))


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        (Behaviour.html("<html></html>"), "not_json"),
        (Behaviour.respond(body=b'{"a": 1}', content_type=None), "not_json"),
        (Behaviour.json([1, 2]), "bad_json"),
        (Behaviour.respond(body=b'{"a": NaN}'), "bad_json"),
        (Behaviour.respond(body=b"[" * 60_000 + b"]" * 60_000), "too_large"),
        (Behaviour.respond(body=b"[" * 30_000 + b"]" * 30_000), "bad_json"),
        (Behaviour.respond(body=b'{"a": ' + b"9" * 5000 + b"}"), "bad_json"),
        (Behaviour.respond(body=b'{"a": "\xff"}'), "bad_json"),
        (Behaviour.truncated_json(), "bad_json"),
        (Behaviour.json({}, headers={"Content-Encoding": "gzip"}), "bad_response"),
        (Behaviour.close_without_response(), "unreachable"),
        (Behaviour.json({}, headers={f"X-{n}": "x" for n in range(120)}), "bad_response"),
        (Behaviour.json({}, headers={"X-Long": "x" * 70_000}), "bad_response"),
        (Behaviour.reset_mid_body(), "unreachable"),
        (Behaviour.json({}, status=404), "http_status"),
    ],
)
def test_answers_that_are_not_a_json_object_are_typed_errors(
    fault_server: FaultServer, behaviour: Behaviour, reason: str
) -> None:
    fault_server.set("/doc", behaviour)
    fails(reason, lambda: GuardedFetcher(allow_loopback=True).json(f"{fault_server.url}/doc"))


def test_text_answers(fault_server: FaultServer) -> None:
    fetch = GuardedFetcher(allow_loopback=True)
    fault_server.set("/did", Behaviour.text(f"{DID}\n"))
    assert fetch.text(f"{fault_server.url}/did") == f"{DID}\n"
    fault_server.set("/did", Behaviour.respond(body=b"\xff\xfe", content_type="text/plain"))
    fails("bad_text", lambda: fetch.text(f"{fault_server.url}/did"))


@dataclass
class Rewriting:
    """A fetch that sends https://<name>/... to a loopback test server (tests only)."""

    inner: GuardedFetcher
    base: str
    allow_loopback: bool = True

    def _moved(self, url: str) -> str:
        return self.base + "/" + url.split("/", 3)[3]

    def json(self, url: str) -> dict[str, Any]:
        return self.inner.json(self._moved(url))

    def text(self, url: str) -> str:
        return self.inner.text(self._moved(url))


def test_a_handle_resolves_through_its_well_known_address(fault_server: FaultServer) -> None:
    fetch = Rewriting(GuardedFetcher(allow_loopback=True), fault_server.url)
    fault_server.set("/.well-known/atproto-did", Behaviour.text(f" {DID}\n"))
    assert resolve_handle("carol.example.com", fetch=fetch) == DID
    fault_server.set("/.well-known/atproto-did", Behaviour.text("not found", status=404))
    with pytest.raises(InvalidIdentifierError):
        resolve_handle("carol.example.com", fetch=fetch)
    fault_server.set("/.well-known/atproto-did", Behaviour.text("oops", status=500))
    fails("http_status", lambda: resolve_handle("carol.example.com", fetch=fetch))
    fault_server.set("/.well-known/atproto-did", Behaviour.text("<html>hello</html>"))
    fails("bad_did", lambda: resolve_handle("carol.example.com", fetch=fetch))


@pytest.mark.parametrize(
    "url",
    ["not a url", "https://", "https://host:99999/", "https://a b.example.com/", "file:///etc/x"],
)
def test_urls_that_are_not_urls_are_refused(url: str) -> None:
    fails("bad_url", lambda: GuardedFetcher(getaddrinfo=dns("93.184.216.34")).json(url))


def test_every_fetch_refuses_plain_http_to_a_public_name() -> None:
    calls: list[str] = []
    fetch = GuardedFetcher(allow_loopback=True, getaddrinfo=dns("93.184.216.34", calls=calls))
    fails("insecure_url", lambda: fetch.json("http://pds.example.com/"))
    assert calls == []


# -- syntax -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "handle"),
    [
        ("alice.bsky.social", "alice.bsky.social"),
        ("ALICE.Bsky.Social", "alice.bsky.social"),
        ("@alice.bsky.social", "alice.bsky.social"),
        ("  alice.bsky.social\n", "alice.bsky.social"),
        ("8.cn", "8.cn"),
        ("xn--ls8h.test.example.com", "xn--ls8h.test.example.com"),
        ("a-b.c-d.io", "a-b.c-d.io"),
        (f"{'a' * 63}.com", f"{'a' * 63}.com"),
        (
            ".".join(["a" * 63] * 3 + ["b" * 57, "com"]),
            ".".join(["a" * 63] * 3 + ["b" * 57, "com"]),
        ),
    ],
)
def test_valid_handles(text: str, handle: str) -> None:
    assert normalize_handle(text) == handle


@pytest.mark.parametrize(
    "text",
    [
        "",
        "alice",
        "@",
        "@@alice.example.com",
        "alice.",
        ".alice.com",
        "alice..com",
        "-alice.com",
        "alice-.com",
        "al_ice.com",
        "alice.com.",
        "alice.123",
        "1.2.3.4",
        "127.0.0.1",
        "[::1]",
        "alice.example.com:443",
        "alice.example.com/x",
        f"{'a' * 64}.com",
        ".".join(["a" * 63] * 3 + ["b" * 58, "com"]),
        "alice.local",
        "alice.arpa",
        "1.0.0.127.in-addr.arpa",
        "alice.invalid",
        "alice.localhost",
        "alice.internal",
        "alice.onion",
        "alice.alt",
        "alice.example",
        "alice.test",
        "\u0430lice.com",  # CYRILLIC SMALL LETTER A
        "\u212aelvin.com",  # KELVIN SIGN lowers to "k"
        "alice\x00.com",
        "did:plc:abcdefghijklmnopqrstuvwx",
        "x" * 10_000,
    ],
)
def test_invalid_handles_are_400s(text: str) -> None:
    with pytest.raises(InvalidIdentifierError) as caught:
        normalize_handle(text)
    assert caught.value.status_code == 400
    assert caught.value.reason == "invalid_handle"


def test_test_handles_only_where_loopback_is_allowed() -> None:
    assert normalize_handle("alice.test", allow_loopback=True) == "alice.test"
    with pytest.raises(InvalidIdentifierError):
        normalize_handle("alice.local", allow_loopback=True)


@given(st.text(max_size=300) | st.from_regex(r"[@ ]?[a-zA-Z0-9.-]{0,80}", fullmatch=True))
def test_normalize_handle_raises_only_the_typed_400(text: str) -> None:
    handle = attempt(normalize_handle, text)
    if isinstance(handle, InvalidIdentifierError):
        assert handle.status_code == 400
    else:
        assert handle.isascii()
        assert handle == handle.lower()
        assert len(handle) <= 253
        assert normalize_handle(handle) == handle


@given(st.text(max_size=300) | st.from_regex(r"did:(plc|web):[a-z0-9.%:-]{0,40}", fullmatch=True))
def test_normalize_did_raises_only_the_typed_400(text: str) -> None:
    did = attempt(normalize_did, text)
    if isinstance(did, InvalidIdentifierError):
        assert did.status_code == 400
    else:
        assert did.startswith(("did:plc:", "did:web:"))


def attempt(function: Callable[[str], str], text: str) -> str | InvalidIdentifierError:
    """``function(text)``, or the typed error it raised (any other exception escapes)."""
    try:
        return function(text)
    except InvalidIdentifierError as error:
        return error


@pytest.mark.parametrize(
    "did",
    [
        "did:plc:abcdefghijklmnopqrstuvwx",
        "did:plc:234567abcdefghijklmnopqr",
        "did:web:example.com",
        "did:web:pds.example.co.uk",
    ],
)
def test_valid_dids(did: str) -> None:
    assert is_did(did)
    assert normalize_did(did) == did


@pytest.mark.parametrize(
    "did",
    [
        "did:plc:ABCDEFGHIJKLMNOPQRSTUVWX",
        "did:plc:abcdefghijklmnopqrstuvw",
        "did:plc:abcdefghijklmnopqrstuvwxy",
        "did:plc:abcdefghijklmnopqrstuvw1",
        "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
        "did:web:Example.com",
        "did:web:example.com:user:alice",
        "did:web:example.com%3A8443",
        "did:web:localhost",
        "did:web:localhost%3A2583",
        "did:web:127.0.0.1",
        "did:web:127.1",
        "did:web:2130706433",
        "did:web:0x7f000001",
        "did:web:0x7f.0.0.1",
        "did:web:0177.0.0.1",
        "did:web:017700000001",
        "did:web:[::1]",
        "did:web:[::ffff:127.0.0.1]",
        "did:web:%5B%3A%3Affff%3A127.0.0.1%5D",
        "did:web:::ffff:7f00:1",
        "did:web:169.254.169.254",
        "did:web:metadata.google.internal",
        "did:web:intranet.local",
        "did:web:",
        "did:",
        "alice.example.com",
    ],
)
def test_invalid_dids_are_400s(did: str) -> None:
    with pytest.raises(InvalidIdentifierError) as caught:
        normalize_did(did)
    assert caught.value.status_code == 400


def test_a_loopback_did_web_only_where_loopback_is_allowed() -> None:
    for did in ("did:web:localhost", "did:web:localhost%3A2583"):
        assert normalize_did(did, allow_loopback=True) == did
    for did in ("did:web:localhost%3A0", "did:web:localhost%3A99999", "did:web:localhost%3Ax"):
        with pytest.raises(InvalidIdentifierError):
            normalize_did(did, allow_loopback=True)


def test_an_invalid_identifier_never_reaches_the_network() -> None:
    calls: list[str] = []
    fetch = GuardedFetcher(getaddrinfo=dns("93.184.216.34", calls=calls))
    for text in ("alice.local", "did:web:2130706433", "did:plc:short", "", "a" * 300):
        with pytest.raises(InvalidIdentifierError):
            resolve(text, fetch=fetch)
    assert calls == []


# -- addresses --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.0.9",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "100.127.255.254",
        "0.0.0.0",
        "0.1.2.3",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "192.0.2.1",
        "198.18.0.1",
        "198.51.100.1",
        "203.0.113.9",
        "192.0.0.8",
        "::",
        "::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "::127.0.0.1",
        "64:ff9b::7f00:1",
        "64:ff9b:1::a00:1",
        "2002:7f00:1::",
        "2002:a00:1::1",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo carrying 127.0.0.1
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "fec0::1",
        "ff02::1",
        "2001:db8::1",
        "100::1",
    ],
)
def test_addresses_that_are_not_public(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    ["93.184.216.34", "1.1.1.1", "8.8.8.8", "2606:4700:4700::1111", "::ffff:93.184.216.34"],
)
def test_public_addresses(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address))


def test_loopback_addresses_in_every_spelling() -> None:
    for address in ("127.0.0.1", "127.8.8.8", "::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1"):
        assert is_loopback_address(ipaddress.ip_address(address))
    for address in ("10.0.0.1", "::2", "93.184.216.34"):
        assert not is_loopback_address(ipaddress.ip_address(address))


def test_errors_are_typed_and_name_their_reason() -> None:
    error = ResolutionError("timeout", "slow", status_code=504)
    assert isinstance(error, AuthenticationError)
    assert (error.reason, error.status_code, error.provider) == ("timeout", 504, "bluesky")
    assert "timeout" in str(error)
    assert InvalidIdentifierError("invalid_handle", "x").status_code == 400


def test_odd_dns_answers_are_refused() -> None:
    """A scoped IPv6 answer, a public answer for a loopback name over http, an address family
    that is not IP: never connected to."""

    def answers(*entries: tuple[Any, ...]) -> Callable[..., list[tuple[Any, ...]]]:
        return lambda *args, **kwargs: list(entries)

    tcp = (socket.SOCK_STREAM, 6, "")
    scoped = answers((socket.AF_INET6, *tcp, ("fe80::1%lo", 443, 0, 1)))
    fails("refused_address", lambda: GuardedFetcher(getaddrinfo=scoped).json("https://a.example/"))
    unix_only = answers((socket.AF_UNIX, *tcp, "/run/x.sock"))
    fails("dns", lambda: GuardedFetcher(getaddrinfo=unix_only).json("https://a.example/"))
    public = GuardedFetcher(allow_loopback=True, getaddrinfo=dns("93.184.216.34"))
    fails("refused_address", lambda: public.json("http://localhost:1/"))
    assert not is_public_address(ipaddress.ip_address("2606:4700:4700::1111%1"))
    fails("bad_url", lambda: GuardedFetcher().json("https://pdś.example.com/"))


def test_a_failing_plc_directory_and_a_did_without_handles(network: FakeNetwork) -> None:
    network.serve(document=did_document(pds=network.url, alsoKnownAs=[]))
    assert network.resolve(DID).handle is None
    network.server.set(f"/{DID}", Behaviour.json({"error": "oops"}, status=503))
    assert fails("http_status", lambda: network.resolve(DID)).http_status == 503


@pytest.mark.parametrize("status", [404, 410])
def test_a_did_the_plc_directory_does_not_know_is_an_account_not_found(
    network: FakeNetwork, status: int
) -> None:
    """What the person typed (a handle naming that DID, or the DID) is no account: a 400 that
    says so, not a 502 that blames their server. 410 is the PLC directory's deleted DID."""
    network.server.set(f"/{DID}", Behaviour.json({"message": "DID not available"}, status=status))
    for typed in (HANDLE, DID):
        error = fails("did_not_found", functools.partial(network.resolve, typed), status=400)
        assert isinstance(error, AccountNotFoundError)
        assert error.public_message == (
            "No account was found for that handle or DID. Please check it and try again."
        )


def test_a_plc_directory_that_fails_or_hangs_stays_a_502_or_504(network: FakeNetwork) -> None:
    network.server.set(f"/{DID}", Behaviour.json({"error": "InternalServerError"}, status=500))
    assert fails("http_status", network.resolve).http_status == 500
    network.server.set(f"/{DID}", Behaviour.hang())
    quick = GuardedFetcher(allow_loopback=True, timeout=0.5)
    fails(
        "timeout",
        lambda: resolve(HANDLE, resolver_url=network.url, plc_url=network.url, fetch=quick),
        status=504,
    )


def test_a_did_web_without_a_document_stays_a_502(fault_server: FaultServer) -> None:
    """A did:web's host answering 404 is that host's fault, not the typing of the person."""
    did = f"did:web:localhost%3A{fault_server.port}"
    fault_server.set("/.well-known/did.json", Behaviour.json({}, status=404))
    error = fails(
        "did_not_found", lambda: resolve_did(did, fetch=GuardedFetcher(allow_loopback=True))
    )
    assert not isinstance(error, InvalidIdentifierError)


def test_only_text_is_a_handle_or_a_did() -> None:
    for function in (normalize_handle, normalize_did):
        with pytest.raises(InvalidIdentifierError):
            function(7)  # type: ignore[arg-type]
    assert not is_did(7)  # type: ignore[arg-type]
