"""The "session" section: what the check of a browser's sessions against the session index
(back-channel and front-channel logout) costs a signed-in page view.

A signed-in browser's ``GET /page`` (a view that reads the session) through the Flask test
client, side by side in one run, interleaved round by round:

- ``project``: the same view without logout support (the session token store: no session
  index, no check);
- ``project-aa``: a second, identical app, for the A/A comparison (noise);
- ``check-10``: a SQLite token store, the browser's session carrying an indexed sign-in, the
  default ``SOCIAL_OAUTH2_SESSION_CHECK_SECONDS`` (10): the index is asked at most every 10 s;
- ``check-0``: the same with ``0``: the index (SQLite, one query by primary key) is asked on
  every request.

Each view must answer 200 with the signed-in identity; a check that signed the browser out
invalidates the run. Targets (the issue's): ``check-10 / project`` >= 0.97 and ``check-0 /
project`` >= 0.8, in rates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from flask import Flask, session

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.accounts import SESSIONS_KEY, SIGNED_IN_KEY
from flask_social_oauth2.tokens.session_index import IndexedSession

from .inprocess import BenchmarkError
from .stats import Check, Rounds, aa_noise, calibrate, median, run_rounds, tolerance

#: The contenders in table order.
CONTENDERS: Final = ("project", "project-aa", "check-10", "check-0")
#: The targets: rate of the contender over the rate of ``project``.
TARGETS: Final = {"check-10": 0.97, "check-0": 0.8}
_BLOCK: Final = {
    "authorizationURL": "https://provider.example/authorize",
    "accessTokenURL": "https://provider.example/token",
    "apiURL": "https://provider.example/me",
    "redirectURL": "/authenticate/bench",
    "clientID": "bench",
    "clientSecret": "bench-secret",
}


def page_app(directory: Path, name: str, check_seconds: float | None) -> Flask:
    """An app whose ``GET /page`` answers the signed-in identity; with ``check_seconds``, a
    SQLite token store (the session index) and that check interval, else the session store."""
    app = Flask(f"session_{name}")
    app.config.update(
        SECRET_KEY="bench-secret-key",
        SOCIAL_OAUTH2_PROVIDERS={"bench": dict(_BLOCK)},
        SOCIAL_OAUTH2_CHECK_REDIRECT_URLS=False,
        TRUSTED_HOSTS=["localhost"],
    )
    if check_seconds is not None:
        app.config["SOCIAL_OAUTH2_TOKEN_STORE"] = f"sqlite:///{directory / name}.sqlite3"
        app.config["SOCIAL_OAUTH2_SESSION_CHECK_SECONDS"] = check_seconds
    SocialOAuth2(app)

    @app.get("/page")
    def page() -> dict[str, Any]:
        return {"identities": session.get(SIGNED_IN_KEY) or {}}

    return app


def signed_in_runner(app: Flask) -> Callable[[int], float]:
    """``n`` page views by one browser signed in as ``alice`` (indexed when the app keeps an
    index)."""
    client = app.test_client()
    index = app.extensions["social_oauth2"].session_index
    now = time.time()
    local_id = f"bench-{app.name}"
    with client.session_transaction() as browser:
        browser[SIGNED_IN_KEY] = {"bench": "alice"}
        if index is not None:
            browser[SESSIONS_KEY] = f"{int(now)} {local_id}"  # the last check, the ids
    if index is not None:
        with app.app_context():
            row = IndexedSession(
                local_id, "bench", "https://op", "alice", "s", "RS256", now, now + 86400
            )
            index.record_session(row)

    def run(n: int) -> float:
        get = client.get
        started = time.perf_counter()
        for _ in range(n):
            response = get("/page")
            if response.status_code != 200 or response.json != {"identities": {"bench": "alice"}}:
                raise BenchmarkError(f"{app.name}: the page answered {response.status}")
        return time.perf_counter() - started

    return run


def measure(
    directory: Path,
    rounds: int,
    batch_s: float,
    *,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> Rounds:
    """Every contender, interleaved round by round; batches calibrated on ``project``."""
    runners = {
        "project": signed_in_runner(page_app(directory, "project", None)),
        "project-aa": signed_in_runner(page_app(directory, "project-aa", None)),
        "check-10": signed_in_runner(page_app(directory, "check-10", 10)),
        "check-0": signed_in_runner(page_app(directory, "check-0", 0)),
    }
    for runner in runners.values():
        runner(20)
    n = calibrate(runners["project"], batch_s)
    return run_rounds(runners, rounds, dict.fromkeys(runners, n), "views/s", on_round=on_round)


def checks(rounds: Rounds) -> list[Check]:
    """The targets of :data:`TARGETS`, each within its own spread or the A/A noise of
    ``project-aa / project``."""
    noise = aa_noise(rounds.round_ratios("project-aa", "project"))
    found = []
    for contender, target in TARGETS.items():
        per_round = rounds.round_ratios(contender, "project")
        found.append(
            Check(
                name=f"signed-in page view: {contender} / without logout support",
                target=target,
                measured=median(per_round),
                tolerance=tolerance(per_round, noise),
            )
        )
    return found


def table(rounds: Rounds) -> list[str]:
    """The section's lines of the printed table."""
    count = len(rounds.rates["project"])
    lines = [
        f"signed-in page view with the session check, in process (median of {count} rounds)",
        f"  {'contender':<14}{'views/s':>12}{'/project':>10}",
    ]
    for name in CONTENDERS:
        ratio = rounds.ratio(name, "project")
        lines.append(f"  {name:<14}{rounds.median_rate(name):>12,.0f}{ratio:>10.2f}")
    return [*lines, ""]
