"""The DNS method of AT Protocol handle resolution (the TXT record ``_atproto.<handle>``),
against a real DNS server on loopback (tests/dns_server.py), and through the ``bluesky``
provider against the real PDS."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from atproto_server import AtprotoServer, sign_in_and_consent
from dns_server import DnsServer
from fault_server import Behaviour, FaultServer
from helpers import MakeApp, callback_path

from flask_social_oauth2 import signals
from flask_social_oauth2.atproto import DnsTxtLookup, GuardedFetcher, resolve_handle
from flask_social_oauth2.atproto.dns_txt import did_from_txt, parse_nameserver
from flask_social_oauth2.errors import ConfigurationError, InvalidIdentifierError, ResolutionError

DID = "did:plc:abcdefghijklmnopqrstuvwx"
OTHER_DID = "did:plc:zyxwvutsrqponmlkjihgfedc"
HANDLE = "carol.example.com"
RECORD = f"_atproto.{HANDLE}"


@pytest.fixture
def dns_server() -> Iterator[DnsServer]:
    with DnsServer() as server:
        yield server


def no_address(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
    """A getaddrinfo for a handle whose host has no web server: no address."""
    return []


class Rewriting:
    """A fetch that sends https://<name>/... to a loopback test server (tests only)."""

    allow_loopback = True

    def __init__(self, base: str) -> None:
        self.inner = GuardedFetcher(allow_loopback=True)
        self.base = base

    def json(self, url: str) -> dict[str, Any]:
        return self.inner.json(self.base + "/" + url.split("/", 3)[3])

    def text(self, url: str) -> str:
        return self.inner.text(self.base + "/" + url.split("/", 3)[3])


def test_a_handle_without_a_web_server_resolves_through_its_txt_record(
    dns_server: DnsServer,
) -> None:
    dns_server.txt[RECORD] = ["v=spf1 -all", f"did={DID}"]
    fetch = GuardedFetcher(getaddrinfo=no_address)
    lookup = DnsTxtLookup(dns_server.address)
    assert resolve_handle(HANDLE, fetch=fetch, dns=lookup) == DID
    assert dns_server.queries == [(RECORD, "TXT")]


def test_a_handle_known_to_neither_method_is_a_400(dns_server: DnsServer) -> None:
    fetch = GuardedFetcher(getaddrinfo=no_address)
    with pytest.raises(InvalidIdentifierError) as caught:
        resolve_handle(HANDLE, fetch=fetch, dns=DnsTxtLookup(dns_server.address))
    assert caught.value.status_code == 400
    assert caught.value.reason == "handle_not_found"
    # without the DNS method, the same handle is the server's failure, not the user's
    with pytest.raises(ResolutionError) as without:
        resolve_handle(HANDLE, fetch=fetch)
    assert (without.value.reason, without.value.status_code) == ("dns", 502)


def test_the_https_method_comes_first(dns_server: DnsServer, fault_server: FaultServer) -> None:
    dns_server.txt[RECORD] = [f"did={OTHER_DID}"]
    fault_server.set("/.well-known/atproto-did", Behaviour.text(DID))
    fetch = Rewriting(fault_server.url)
    assert resolve_handle(HANDLE, fetch=fetch, dns=DnsTxtLookup(dns_server.address)) == DID
    assert dns_server.queries == []


def test_a_failing_web_server_falls_back_to_dns_else_keeps_its_error(
    dns_server: DnsServer, fault_server: FaultServer
) -> None:
    fault_server.set("/.well-known/atproto-did", Behaviour.text("oops", status=500))
    fetch = Rewriting(fault_server.url)
    lookup = DnsTxtLookup(dns_server.address)
    with pytest.raises(ResolutionError) as caught:
        resolve_handle(HANDLE, fetch=fetch, dns=lookup)
    assert (caught.value.reason, caught.value.status_code) == ("http_status", 502)
    dns_server.txt[RECORD] = [f"did={DID}"]
    assert resolve_handle(HANDLE, fetch=fetch, dns=lookup) == DID


def test_records_claiming_two_dids_are_refused(dns_server: DnsServer) -> None:
    dns_server.txt[RECORD] = [f"did={DID}", f"did={OTHER_DID}"]
    fetch = GuardedFetcher(getaddrinfo=no_address)
    with pytest.raises(ResolutionError) as caught:
        resolve_handle(HANDLE, fetch=fetch, dns=DnsTxtLookup(dns_server.address))
    assert (caught.value.reason, caught.value.status_code) == ("ambiguous_dns", 502)
    # the same DID twice is one claim
    assert did_from_txt(HANDLE, [f"did={DID}", f"did={DID}", "other"]) == DID
    assert did_from_txt(HANDLE, ["other", "did:plc:x"]) is None


def test_a_record_that_is_not_a_did_is_refused(dns_server: DnsServer) -> None:
    dns_server.txt[RECORD] = ["did=https://evil.example.com/"]
    fetch = GuardedFetcher(getaddrinfo=no_address)
    with pytest.raises(ResolutionError) as caught:
        resolve_handle(HANDLE, fetch=fetch, dns=DnsTxtLookup(dns_server.address))
    assert caught.value.reason == "bad_did"


def test_a_silent_dns_server_is_a_504_within_the_time_cap(dns_server: DnsServer) -> None:
    dns_server.mode = "silent"
    lookup = DnsTxtLookup(dns_server.address, timeout=0.4)
    began = time.monotonic()
    with pytest.raises(ResolutionError) as caught:
        lookup(RECORD)
    assert time.monotonic() - began < 1.5
    assert (caught.value.reason, caught.value.status_code) == ("timeout", 504)
    # during a sign-in the web server's failure is what the user is told of
    fetch = GuardedFetcher(getaddrinfo=no_address)
    with pytest.raises(ResolutionError) as during:
        resolve_handle(HANDLE, fetch=fetch, dns=lookup)
    assert during.value.reason == "dns"
    assert isinstance(during.value.__cause__, ResolutionError)


def test_a_failing_dns_server_is_a_502(dns_server: DnsServer) -> None:
    dns_server.mode = "servfail"
    with pytest.raises(ResolutionError) as caught:
        DnsTxtLookup(dns_server.address, timeout=1)(RECORD)
    assert (caught.value.reason, caught.value.status_code) == ("dns_failed", 502)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("127.0.0.1", ("127.0.0.1", 53)),
        ("127.0.0.1:5353", ("127.0.0.1", 5353)),
        ("[::1]:53", ("::1", 53)),
        ("[::1]", ("::1", 53)),
        ("::1", ("::1", 53)),
        ("9.9.9.9", ("9.9.9.9", 53)),
    ],
)
def test_nameservers(text: str, parsed: tuple[str, int]) -> None:
    assert parse_nameserver(text) == parsed


@pytest.mark.parametrize(
    "text",
    ["localhost", "dns.example.com:53", "1.2.3.4:0", "1.2.3.4:99999", "1.2.3.4:ab", "[::1]x", ""],
)
def test_nameservers_that_are_not_an_address_and_port(text: str) -> None:
    with pytest.raises(ValueError, match=r"must be an IP address|port"):
        parse_nameserver(text)


def test_a_dns_resolver_that_is_not_an_address_is_a_configuration_error(
    make_app: MakeApp,
) -> None:
    block = {
        "authorizationURL": "https://bsky.social/oauth/authorize",
        "accessTokenURL": "https://bsky.social/oauth/token",
        "redirectURL": "/authenticate/bluesky",
        "clientID": "http://localhost",
        "clientSecret": "unused",
        "customProperties": {"dnsResolver": "dns.example.com"},
    }
    with pytest.raises(ConfigurationError) as caught:
        make_app({"bluesky": block})
    assert "customProperties.dnsResolver" in str(caught.value)
    assert "must be an IP address" in str(caught.value)


@pytest.mark.atproto
def test_alice_signs_in_with_a_handle_only_dns_knows(
    make_app: MakeApp, atproto_server: AtprotoServer, dns_server: DnsServer, tmp_path: Path
) -> None:
    """No resolver service: ``https://alice.test/`` has no address, so her handle resolves
    through the TXT record the DNS server holds, then the real PLC and PDS."""
    alice = atproto_server.accounts["alice.test"]
    dns_server.txt["_atproto.alice.test"] = [f"did={alice.did}"]
    block = {
        "authorizationURL": f"{atproto_server.pds_url}/oauth/authorize",
        "accessTokenURL": f"{atproto_server.pds_url}/oauth/token",
        "redirectURL": "/authenticate/bluesky",
        "clientID": "http://localhost",
        "clientSecret": "unused",
        "customProperties": {
            "plcURL": atproto_server.plc_url,
            "allowLoopback": "true",
            "dnsResolver": dns_server.address,
        },
    }
    app = make_app({"bluesky": block})
    seen: list[Any] = []
    signals.authenticated.connect(lambda sender, **extra: seen.append(extra), app, weak=False)
    client = app.test_client()
    base_url = "http://127.0.0.1:5000"
    started = client.get("/authenticate/bluesky?handle=alice.test", base_url=base_url)
    assert started.status_code == 302, started.text
    assert ("_atproto.alice.test", "TXT") in dns_server.queries
    location = started.headers["Location"]
    assert set(dict(parse_qsl(urlsplit(location).query))) == {"client_id", "request_uri"}
    callback = sign_in_and_consent(location, "alice.test", alice.password)
    finished = client.get(callback_path(callback), base_url=base_url)
    assert finished.status_code == 302, finished.text
    (event,) = seen
    assert event["profile"].provider_key == alice.did
    assert event["profile"].username == "alice.test"

    dns_server.txt.clear()
    unknown = client.get("/authenticate/bluesky?handle=alice.test", base_url=base_url)
    assert unknown.status_code == 400
    assert "No account was found for that handle or DID." in unknown.text
