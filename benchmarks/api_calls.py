"""The "api call" section: an API call inside a Flask view, after sign-in.

Each contender's browser signs in once (a real whole flow against the provider server), then
calls ``GET /api-call`` of its app (:data:`benchmarks.apps.API_PATH`) through the Flask test
client, over and over. The view makes one real HTTP call of the provider server's
bearer-protected ``GET /api/me`` on loopback and answers the ``client`` of the API's JSON, which
the runner checks: the server names the client_id the token was issued to, so each contender is
seen sending its own token. The server also counts the API requests per client_id; after the
rounds they must equal the calls the runners made, or the run is invalid.

- ``project``: ``social.api("bench").get("me")``, the token in the default (session) store;
- ``project-sql``: the same with ``SOCIAL_OAUTH2_TOKEN_STORE`` a SQLite file (reported, not
  judged);
- ``project-dpop``: the same (session store) for an identity whose tokens are DPoP-bound
  (``customProperties.dpop``): its sign-in is a real DPoP sign-in (a proof on the token and
  profile requests, a ``token_type`` DPoP answer), and every call carries
  ``Authorization: DPoP`` and a fresh proof, which the server checks (see
  :mod:`benchmarks.provider_server`). Judged against ``project``: the cost of the proof;
- ``bare`` and ``bare-aa``: a pooled ``requests.Session`` and a bearer header from Flask's
  session;
- ``authlib``: ``oauth.bench.get("api/me", token=...)``, the token from Flask's session;
- ``flask-dance``: ``blueprint.session.get("api/me")``, the token in its default session storage.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from flask import Flask
from flask.testing import FlaskClient

from .apps import API_PATH, START_PATHS, make_app, project_app
from .inprocess import BenchmarkError, ProviderServer, api_runner, signed_in_browser
from .stats import Rounds, calibrate, run_rounds

#: The contenders in table order, and the client_id each one's token is issued to.
CLIENT_IDS: Final = {
    "project": "project",
    "bare": "bare",
    "bare-aa": "bare",
    "authlib": "authlib",
    "flask-dance": "flask-dance",
    "project-sql": "project-sql",
    "project-dpop": "project-dpop",
}
#: Reported beside the others, not judged against the bare view and the peers.
UNJUDGED: Final = ("project-sql", "project-dpop")
#: The project's own contenders, signed in before the peers' insecure-transport switches.
PROJECT_CONTENDERS: Final = ("project", "project-sql", "project-dpop")

_codes = itertools.count()


@dataclass(frozen=True)
class Contender:
    """One contender's app and its browser, signed in."""

    name: str
    app: Flask
    browser: FlaskClient

    @property
    def client_id(self) -> str:
        """The client_id the contender's token names."""
        return CLIENT_IDS[self.name]


def _signed_in(name: str, app: Flask) -> Contender:
    start = START_PATHS["project" if name in PROJECT_CONTENDERS else name.removesuffix("-aa")]
    browser = signed_in_browser(app, start, f"api-code-{next(_codes)}")
    return Contender(name, app, browser)


def project_contenders(provider_url: str, directory: Path) -> list[Contender]:
    """The project with the session store, with a SQL store (a SQLite file in ``directory``)
    and with DPoP-bound tokens, each signed in and checked with one call. They need neither
    peer's insecure-transport switch: call this before they are set.

    :raises BenchmarkError: when the sign-in or the call does not answer as it should.
    """
    database = f"sqlite:///{(directory / 'tokens.sqlite3').resolve()}"
    contenders = [
        _signed_in("project", project_app(provider_url)),
        _signed_in(
            "project-sql",
            project_app(provider_url, client_id="project-sql", token_store=database),
        ),
        _signed_in("project-dpop", project_app(provider_url, client_id="project-dpop", dpop=True)),
    ]
    for contender in contenders:
        api_runner(contender.browser, contender.name, API_PATH, contender.client_id, {})(1)
    return contenders


def peer_contenders(provider_url: str) -> list[Contender]:
    """The bare baseline (twice, for the A/A), Authlib and Flask-Dance, each signed in; the
    peers need their insecure-transport switches set."""
    return [
        _signed_in(name, make_app(name.removesuffix("-aa"), provider_url, api=True))
        for name in ("bare", "bare-aa", "authlib", "flask-dance")
    ]


@dataclass
class Measured:
    """The rounds and what the server saw."""

    rounds: Rounds
    #: Calls made per contender (warm-up and calibration included).
    calls: dict[str, int] = field(default_factory=dict)
    #: API requests the server saw per client_id during the section.
    api_requests: dict[str, int] = field(default_factory=dict)
    #: Of those, requests with a DPoP proof that passed the server's checks, and proofs whose
    #: signature the server verified (a sample), per client_id.
    dpop_requests: dict[str, int] = field(default_factory=dict)
    dpop_verified: dict[str, int] = field(default_factory=dict)


def measure(
    server: ProviderServer,
    contenders: Sequence[Contender],
    rounds: int,
    batch_s: float,
    *,
    warm_up: int = 20,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> Measured:
    """Every contender's API calls, interleaved round by round; batches calibrated on ``bare``.

    :raises BenchmarkError: when a call answers wrongly, or the server's count of API requests
        of a client_id is not the number of calls its contenders made (for ``project-dpop``:
        of requests whose DPoP proof passed its checks).
    """
    by_name = {c.name: c for c in contenders}
    ordered = [by_name[name] for name in CLIENT_IDS if name in by_name]
    calls: dict[str, int] = {}
    before = server.stats()
    runners = {c.name: api_runner(c.browser, c.name, API_PATH, c.client_id, calls) for c in ordered}
    for runner in runners.values():
        runner(warm_up)
    n = calibrate(runners["bare"], batch_s) if "bare" in runners else warm_up
    result = run_rounds(runners, rounds, dict.fromkeys(runners, n), "calls/s", on_round=on_round)
    after = server.stats()

    def seen_of(key: str) -> dict[str, int]:
        return {
            client: counts.get(key, 0) - before.get(client, {}).get(key, 0)
            for client, counts in after.items()
        }

    seen = seen_of("api_requests")
    dpop_seen = seen_of("dpop_requests")
    expected: dict[str, int] = {}
    for contender in ordered:
        expected[contender.client_id] = expected.get(contender.client_id, 0) + calls[contender.name]
    for client, count in expected.items():
        if seen.get(client, 0) != count:
            raise BenchmarkError(
                f"{client}: the API server saw {seen.get(client, 0)} API requests, not {count}"
            )
        if client == CLIENT_IDS["project-dpop"] and dpop_seen.get(client, 0) != count:
            raise BenchmarkError(
                f"{client}: {dpop_seen.get(client, 0)} of {count} API requests had a valid proof"
            )
    return Measured(
        result,
        calls,
        {client: seen[client] for client in sorted(expected)},
        {client: dpop_seen[client] for client in sorted(expected) if dpop_seen.get(client)},
        {
            client: count
            for client, count in seen_of("dpop_signatures_verified").items()
            if count and client in expected
        },
    )


def requests_lines(measured: Measured) -> list[str]:
    """What the API server saw, beside the calls the contenders made."""
    lines = ["  API requests the server saw during the section (= the calls the views made):"]
    for client, count in measured.api_requests.items():
        made = sum(n for name, n in measured.calls.items() if CLIENT_IDS[name] == client)
        line = f"    {client:<12} {count:>7} API requests, {made:>7} calls"
        if client in measured.dpop_requests:
            line += (
                f"; {measured.dpop_requests[client]} DPoP proofs checked, "
                f"{measured.dpop_verified.get(client, 0)} signatures verified"
            )
        lines.append(line)
    lines.append("  (project-sql: the project with the SQL token store on SQLite; not judged)")
    lines.append("  (project-dpop: the project with DPoP-bound tokens; judged against project)")
    return [*lines, ""]
