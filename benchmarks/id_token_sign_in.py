"""The "idtoken" section: a sign-in with an ID token the browser posts (Google's button, One
Tap, FedCM: ``customProperties.idTokenSignIn``) against a whole code-flow sign-in.

Side by side in one run, interleaved round by round, each operation a fresh browser (a new
test client):

- ``code-flow``: the project's whole flow, as in the "flow" section: start, callback, the
  token request and the profile request to the provider server (real HTTP on loopback);
- ``id-token``: the sign-in itself, the POST of ``credential`` and the ``g_csrf_token``
  pair: verified (RS256, the key set cached after the first sign-in, from a discovery document
  and key set served on loopback), the nonce spent, signed in (302). Untimed in the judged
  figure: the app's page that issues the browser's nonce (``social.id_token_nonce``, its cookie
  set; the page carries Google's markup, a page the app serves anyway: its time is shown, not
  judged), and Google's part, signing the ID token, done for a batch before its sign-ins (see
  :func:`id_token_runner`);
- ``id-token-aa``: a second, identical app, for the A/A noise.

Target: an ID-token sign-in costs at most a third of a whole code-flow sign-in (:func:`check`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from flask import Flask, Response, jsonify
from joserfc import jwt
from joserfc.jwk import RSAKey

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.local_idp.serving import LoopbackServer

from .apps import START_PATHS, base_app, project_app
from .inprocess import BenchmarkError, ProviderServer, flow_runner
from .stats import MAX_TOLERANCE, Check, Rounds, aa_noise, calibrate, median, run_rounds, tolerance

CONTENDERS: Final = ("code-flow", "id-token", "id-token-aa")
#: An ID-token sign-in takes at most this share of a whole code-flow sign-in's time.
TARGET: Final = 1 / 3
CLIENT_ID: Final = "bench-one-tap.apps.example"
PAIR: Final = "bench-double-submit-pair"


class Issuer:
    """A discovery document and key set on loopback, and the key that signs the ID tokens."""

    def __init__(self) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": "bench-1", "use": "sig"})
        app = Flask("bench_issuer")
        self.server = LoopbackServer(app, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.port}"
        document = {
            "issuer": self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "jwks_uri": f"{self.url}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }
        served = {
            "/.well-known/openid-configuration": document,
            "/jwks": {"keys": [self.key.as_dict(private=False)]},
        }

        @app.get("/<path:path>")
        def serve(path: str) -> Response:
            answer = jsonify(served[f"/{path}"])
            answer.headers["Cache-Control"] = "max-age=3600"  # cached after the first sign-in
            return answer

    def credential(self, nonce: str) -> str:
        """An ID token as Google's sign-in hands a page, for ``nonce``."""
        now = int(time.time())
        claims = {
            "iss": self.url,
            "azp": CLIENT_ID,
            "aud": CLIENT_ID,
            "sub": "110169484474386276334",
            "email": "ada@example.test",
            "email_verified": True,
            "name": "Ada Lovelace",
            "nonce": nonce,
            "iat": now,
            "exp": now + 3600,
        }
        return jwt.encode({"alg": "RS256", "kid": "bench-1"}, claims, self.key)


@contextmanager
def issuer() -> Iterator[Issuer]:
    """An :class:`Issuer`, stopped on every way out."""
    started = Issuer()
    try:
        yield started
    finally:
        started.server.stop()


def id_token_app(issuer_url: str, name: str) -> Flask:
    """The project with a ``google`` block that takes posted ID tokens; ``GET /sign-in``
    answers this browser's nonce."""
    app = base_app(name)
    app.config["SOCIAL_OAUTH2_PROVIDERS"] = {
        "google": {
            "authorizationURL": "https://accounts.google.com/o/oauth2/v2/auth",
            "accessTokenURL": "https://oauth2.googleapis.com/token",
            "redirectURL": "/authenticate/google",
            "clientID": CLIENT_ID,
            "clientSecret": "bench-client-secret",
            "scope": "openid email profile",
            "customProperties": {"issuer": issuer_url, "idTokenSignIn": "true"},
        }
    }
    social = SocialOAuth2(app)

    @app.get("/sign-in")
    def sign_in_page() -> str:
        return social.id_token_nonce("google")

    return app


def id_token_runner(
    app: Flask, signer: Issuer, page_us: list[float] | None = None
) -> Callable[[int], float]:
    """``n`` ID-token sign-ins of fresh browsers; each must end in a 302 to ``/``. The time of
    the sign-ins (the POSTs) is returned; that of the page issuing each browser's nonce is
    added to ``page_us`` (microseconds per page, one value per call).

    The order of one batch, as it happens for real:

    1. each browser gets the app's page, which issues its nonce;
    2. Google signs each browser's ID token: on Google's servers for real, so done here for the
       whole batch before any sign-in is timed. Signed right before each timed POST, the
       2048-bit RSA private-key operation in this process evicted the app's code and data from
       the CPU caches and added about 13% to the POST that followed (1.33 ms against
       1.17 ms, interleaved in one process);
    3. each browser shows the page again (untimed; the same nonce, still fresh) and posts its
       credential (timed).
    """

    def run(n: int) -> float:
        browsers = []
        started = time.perf_counter()
        for _ in range(n):
            client = app.test_client()
            browsers.append((client, client.get("/sign-in").text))
        page = time.perf_counter() - started
        credentials = [signer.credential(nonce) for _, nonce in browsers]
        took = 0.0
        for (client, nonce), credential in zip(browsers, credentials, strict=True):
            if client.get("/sign-in").text != nonce:
                raise BenchmarkError(f"{app.name}: the page gave a fresh browser a new nonce")
            client.set_cookie("g_csrf_token", PAIR)
            form = {"credential": credential, "g_csrf_token": PAIR}
            started = time.perf_counter()
            answer = client.post("/authenticate/google", data=form)
            took += time.perf_counter() - started
            if answer.status_code != 302 or answer.headers.get("Location") != "/":
                raise BenchmarkError(f"{app.name}: ID-token sign-in answered {answer.status}")
        if page_us is not None:
            page_us.append(1e6 * page / n)
        return took

    return run


@dataclass(frozen=True)
class Measured:
    """The rounds, and the time of the nonce page of each ``id-token`` batch."""

    rounds: Rounds
    page_us: list[float]


def measure(
    server: ProviderServer,
    rounds: int,
    batch_s: float,
    *,
    warm_up: int = 10,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> Measured:
    """Every contender, interleaved round by round; batches calibrated on ``code-flow``.

    :raises BenchmarkError: when a sign-in answers wrongly.
    """
    page_us: list[float] = []
    with issuer() as signer:
        runners = {
            "code-flow": flow_runner(project_app(server.url), START_PATHS["project"]),
            "id-token": id_token_runner(id_token_app(signer.url, "id-token"), signer, page_us),
            "id-token-aa": id_token_runner(id_token_app(signer.url, "id-token-aa"), signer),
        }
        for runner in runners.values():  # the key set is fetched and cached here
            runner(warm_up)
        page_us.clear()
        n = calibrate(runners["code-flow"], batch_s)
        page_us.clear()
        measured = run_rounds(
            runners, rounds, dict.fromkeys(runners, n), "flows/s", on_round=on_round
        )
    return Measured(measured, page_us)


def check(measured: Measured) -> Check:
    """The time of an ID-token sign-in over that of a whole code-flow sign-in, per round: at
    most :data:`TARGET`, within the A/A noise of ``id-token-aa / id-token``."""
    rounds = measured.rounds
    shares = rounds.round_ratios("code-flow", "id-token")  # rates: the inverse of the times
    noise = aa_noise(rounds.round_ratios("id-token-aa", "id-token"))
    return Check(
        name="ID-token sign-in: its time / a whole code-flow sign-in's (key set cached)",
        target=TARGET,
        measured=median(shares),
        tolerance=min(tolerance(shares, noise), MAX_TOLERANCE),
        kind="at most",
        detail="id-token: the POST of the credential; its nonce page and signing untimed",
    )


def table(measured: Measured) -> list[str]:
    """The section's lines of the printed table."""
    rounds = measured.rounds
    count = len(rounds.rates["code-flow"])
    noise = aa_noise(rounds.round_ratios("id-token-aa", "id-token"))
    lines = [
        f"ID-token sign-in against a whole code-flow sign-in, in process (median of {count}"
        f" rounds; A/A noise {noise:.1%})",
        f"  {'contender':<14}{'flows/s':>12}{'us/flow':>10}",
    ]
    for name in CONTENDERS:
        rate = rounds.median_rate(name)
        lines.append(f"  {name:<14}{rate:>12,.0f}{1e6 / rate:>10.1f}")
    share = median(rounds.round_ratios("code-flow", "id-token"))
    return [
        *lines,
        f"  id-token time / code-flow time: {share:.2f} (target at most 0.33)",
        f"  the page that issues the nonce, before it (not judged):"
        f" {median(measured.page_us):.1f} us",
        "",
    ]
