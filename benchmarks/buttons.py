"""The "buttons" section: what drawing every sign-in button adds to a page.

"Rendering every button adds under a millisecond to a page": one app with every brand's
provider (Google, Apple, Microsoft, GitHub, Facebook, LinkedIn, Bluesky) and a neutral one
serves two pages through the Flask test client, side by side in one run, interleaved round by
round:

- ``page``: a small page rendered from a template, without buttons;
- ``page-aa``: the same page again, for the A/A comparison (noise);
- ``page+buttons``: the same page with ``{{ social_sign_in_buttons(next="/home") }}``.

Per round, the extra time per page is ``1 / rate(page+buttons) - 1 / rate(page)``; the target
is its median, at most :data:`TARGET_MS`. The noise, in the same milliseconds, is
max(|median|, IQR / 2) of ``1 / rate(page-aa) - 1 / rate(page)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from flask import Flask, render_template
from jinja2 import DictLoader
from joserfc.jwk import ECKey

from flask_social_oauth2 import SocialOAuth2

from .inprocess import BenchmarkError
from .stats import MAX_TOLERANCE, Check, Rounds, calibrate, iqr, median, run_rounds

CONTENDERS: Final = ("page", "page-aa", "page+buttons")
#: Milliseconds every button may add to a page.
TARGET_MS: Final = 1.0
_PAGE: Final = (
    "<!doctype html><title>Sign in</title><main><h1>Welcome, {{ name }}</h1>"
    "{% for item in items %}<p>{{ item }}</p>{% endfor %}{{ extra }}</main>"
)
_BUTTONS: Final = _PAGE.replace("{{ extra }}", "{{ social_sign_in_buttons(next='/home') }}")


def _block(name: str, **changes: Any) -> dict[str, Any]:
    block = {
        "authorizationURL": f"https://{name}.example/authorize",
        "accessTokenURL": f"https://{name}.example/token",
        "apiURL": f"https://{name}.example/userinfo",
        "redirectURL": f"/authenticate/{name}",
        "clientID": "bench-client",
        "clientSecret": "bench-secret",
    }
    block.update(changes)
    return block


def buttons_app() -> Flask:
    """An app with every brand's provider and a neutral one, and the two pages."""
    key = ECKey.generate_key("P-256", private=True).as_pem(private=True).decode("ascii")
    providers = {
        name: _block(name)
        for name in ("google", "microsoft", "github", "facebook", "linkedin", "acme")
    }
    providers["apple"] = _block(
        "apple", clientSecret=key, customProperties={"teamID": "ABCDE12345", "keyID": "FGHIJ67890"}
    )
    providers["bluesky"] = _block("bluesky", clientID="http://localhost", clientSecret=key)
    app = Flask("bench_buttons")
    app.config.update(
        SECRET_KEY="bench", TRUSTED_HOSTS=["localhost"], SOCIAL_OAUTH2_PROVIDERS=providers
    )
    app.jinja_loader = DictLoader({"page.html": _PAGE, "buttons.html": _BUTTONS})
    SocialOAuth2(app)
    items = [f"line {i}" for i in range(20)]

    @app.get("/page")
    def page() -> str:
        return render_template("page.html", name="Ada", items=items, extra="")

    @app.get("/buttons")
    def with_buttons() -> str:
        return render_template("buttons.html", name="Ada", items=items)

    return app


def page_runner(app: Flask, path: str, wanted: str) -> Callable[[int], float]:
    """``n`` GETs of ``path``, each a 200 holding ``wanted``."""
    client = app.test_client()

    def run(n: int) -> float:
        get = client.get
        started = time.perf_counter()
        for _ in range(n):
            response = get(path)
            if response.status_code != 200 or wanted not in response.text:
                raise BenchmarkError(f"{path} answered {response.status}: {response.text[:200]}")
        return time.perf_counter() - started

    return run


def measure(
    rounds: int,
    batch_s: float,
    *,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> Rounds:
    """Every contender, interleaved round by round; batches calibrated on ``page``."""
    app = buttons_app()
    runners = {
        "page": page_runner(app, "/page", "line 19"),
        "page-aa": page_runner(app, "/page", "line 19"),
        "page+buttons": page_runner(app, "/buttons", "Sign in with Bluesky"),
    }
    for runner in runners.values():
        runner(20)
    batch = dict.fromkeys(runners, calibrate(runners["page"], batch_s))
    return run_rounds(runners, rounds, batch, "pages/s", on_round=on_round)


def _extra_ms(rounds: Rounds, contender: str) -> list[float]:
    return [
        1000 / with_it - 1000 / without
        for with_it, without in zip(rounds.rates[contender], rounds.rates["page"], strict=True)
        if with_it > 0 and without > 0
    ]


def check(rounds: Rounds) -> Check:
    """The median extra time per page with every button is at most :data:`TARGET_MS`."""
    extra = _extra_ms(rounds, "page+buttons")
    noise = _extra_ms(rounds, "page-aa")
    allowance = max(abs(median(noise)), iqr(noise) / 2, iqr(extra) / 2)
    return Check(
        name="a page with every sign-in button: extra time per page, ms",
        target=TARGET_MS,
        measured=median(extra),
        tolerance=min(allowance / TARGET_MS, MAX_TOLERANCE),
        kind="at most",
        detail=f"{len(rounds.rates['page'])} rounds; 8 providers, 7 of them brands",
    )


def table(rounds: Rounds) -> list[str]:
    """The section's lines of the printed table."""
    lines = [
        f"a page with and without every sign-in button (median of {len(rounds.rates['page'])}"
        " rounds)",
        f"  {'contender':<14}{'pages/s':>12}{'us/page':>10}",
    ]
    for name in CONTENDERS:
        rate = rounds.median_rate(name)
        lines.append(f"  {name:<14}{rate:>12,.0f}{1e6 / rate:>10.1f}")
    lines += [
        f"  extra per page with the buttons: {median(_extra_ms(rounds, 'page+buttons')):.3f} ms"
        f" (A/A {median(_extra_ms(rounds, 'page-aa')):+.3f} ms)",
        "",
    ]
    return lines
