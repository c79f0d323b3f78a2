"""The benchmark code still runs: a tiny configuration load, one whole-flow round (of the
project and of the urllib3 floor; the sign-in-only project keeps what the floor keeps), one
round of API calls of every contender, one round of the PAR section (and its endpoint) and one
round of the import section.

Timings are not asserted (machines are shared); the structure of the results and the success of
every flow are.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import pytest
from joserfc.jwk import RSAKey

from flask_social_oauth2.oauth import dpop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import (  # noqa: E402
    api_calls,
    buttons,
    config_load,
    id_token_sign_in,
    import_time,
    inprocess,
    par_start,
    provider_server,
    report,
    session_check,
)
from benchmarks.apps import (  # noqa: E402
    API_PATH,
    BARE_URLLIB3,
    PROJECT_LOADED,
    PROJECT_NONE,
    START_PATHS,
    make_app,
)
from benchmarks.cli import _floor_lines  # noqa: E402
from benchmarks.stats import Check, Rounds, run_rounds  # noqa: E402


def test_config_load_benchmark_at_a_tiny_size(tmp_path: Path) -> None:
    results = config_load.measure(tmp_path, sizes=(2, 5, 8), rounds=2)
    assert sorted(results) == [2, 5, 8]
    for size, result in results.items():
        assert result["providers"] == size
        assert len(result["yaml_s"]) == len(result["load_s"]) == 2
        assert result["ratio"] > 0
    checks = config_load.checks(results)
    assert len(checks) == 4
    assert all(isinstance(check, Check) for check in checks)
    assert report.config_table(results)[2].split()[0] == "2"


def test_one_whole_flow_round_of_the_project_against_the_loopback_server() -> None:
    assert not os.environ.get("AUTHLIB_INSECURE_TRANSPORT")
    assert not os.environ.get("OAUTHLIB_INSECURE_TRANSPORT")
    with inprocess.provider_server() as server:
        app = make_app("project", server.url)
        runner = inprocess.flow_runner(app, START_PATHS["project"])
        rounds = run_rounds({"project": runner}, rounds=1, batch={"project": 6}, unit="flows/s")
        cost = inprocess.one_flow(app, START_PATHS["project"], "cost")
        stats = server.stats()
    assert list(rounds.rates) == ["project"]
    assert len(rounds.rates["project"]) == 1
    assert rounds.median_rate("project") > 0
    # every flow reached the provider: one token request with PKCE and one profile request each
    assert stats["project"] == {
        "token_requests": 7,
        "pkce_token_requests": 7,
        "profile_requests": 7,
        "api_requests": 0,
        "dpop_requests": 0,
        "dpop_signatures_verified": 0,
        "par_requests": 0,
    }
    assert cost.cookies_set >= 1
    assert cost.set_cookie_bytes > cost.cookie_bytes_sent > 0


def test_the_bare_urllib3_floor_does_the_whole_flow() -> None:
    with inprocess.provider_server() as server:
        app = make_app(BARE_URLLIB3, server.url)
        runner = inprocess.flow_runner(app, START_PATHS[BARE_URLLIB3])
        rounds = run_rounds({BARE_URLLIB3: runner}, rounds=1, batch={BARE_URLLIB3: 3}, unit="x")
        stats = server.stats()
    assert rounds.median_rate(BARE_URLLIB3) > 0
    assert stats[BARE_URLLIB3]["token_requests"] == stats[BARE_URLLIB3]["profile_requests"] == 3


def test_the_loaded_provider_contender_starts_sign_ins_from_its_cached_loader_answer() -> None:
    with inprocess.provider_server() as server:
        app = make_app(PROJECT_LOADED, server.url)
        assert dict(app.extensions["social_oauth2"].providers) == {}
        runner = inprocess.redirect_runner(app, START_PATHS[PROJECT_LOADED])
        rounds = run_rounds({PROJECT_LOADED: runner}, rounds=1, batch={PROJECT_LOADED: 5}, unit="x")
        browser = inprocess.signed_in_browser(app, START_PATHS[PROJECT_LOADED], "c")
        with browser.session_transaction() as session:
            assert "social_profile" in session
    assert rounds.median_rate(PROJECT_LOADED) > 0
    assert len(app.extensions["social_oauth2"].loaded) == 1


def test_the_sign_in_only_project_keeps_the_profile_and_no_token_like_the_floor() -> None:
    with inprocess.provider_server() as server:
        kept = {}
        for name in ("project", PROJECT_NONE, BARE_URLLIB3):
            browser = inprocess.signed_in_browser(
                make_app(name, server.url), START_PATHS[name], "c"
            )
            with browser.session_transaction() as session:
                kept[name] = dict(session)
        stats = server.stats()
    assert "social_oauth2_tokens" in kept["project"]
    assert kept[PROJECT_NONE] == {"social_profile": kept["project"]["social_profile"]}
    assert list(kept[BARE_URLLIB3]) == ["profile"]
    assert kept[PROJECT_NONE]["social_profile"]["email"] == kept[BARE_URLLIB3]["profile"]["email"]
    assert (
        stats[PROJECT_NONE]["pkce_token_requests"] == stats[PROJECT_NONE]["profile_requests"] == 1
    )


def test_the_floor_lines_judge_the_sign_in_only_project_and_show_the_default() -> None:
    rounds = Rounds(
        "flows/s",
        rates={
            "project": [800.0, 1000.0],
            PROJECT_NONE: [1000.0, 1250.0],
            BARE_URLLIB3: [1000.0] * 2,
        },
        cpu_rates={"project": [900.0] * 2, PROJECT_NONE: [950.0] * 2, BARE_URLLIB3: [1000.0] * 2},
    )
    judged, shown, cost, blank = _floor_lines(rounds)
    assert judged.startswith("  project-none / bare-urllib3 1.125x (judged; by this process's CPU")
    assert judged.endswith(" 0.950x)")
    assert shown.startswith("  project / bare-urllib3 0.900x (not judged: it also keeps tokens")
    # per round 1,250 - 1,000 us and 1,000 - 800 us: a median of 225 us
    assert cost == "  keeping the encrypted tokens in the session: +225 us per flow"
    assert blank == ""


def test_one_round_of_api_calls_of_every_contender(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not os.environ.get("AUTHLIB_INSECURE_TRANSPORT")
    assert not os.environ.get("OAUTHLIB_INSECURE_TRANSPORT")
    with inprocess.provider_server() as server:
        # the project's own (session and SQL store) need no insecure-transport switch
        contenders = api_calls.project_contenders(server.url, tmp_path)
        monkeypatch.setenv("AUTHLIB_INSECURE_TRANSPORT", "1")
        monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")
        contenders += api_calls.peer_contenders(server.url)
        measured = api_calls.measure(server, contenders, rounds=1, batch_s=0.01, warm_up=2)
        stats = server.stats()
    rounds = measured.rounds
    assert list(rounds.rates) == list(api_calls.CLIENT_IDS)
    assert all(rates[0] > 0 for rates in rounds.rates.values())
    # the server saw exactly the calls each contender's view made, with its own token
    assert set(measured.api_requests) == set(api_calls.CLIENT_IDS.values())
    assert measured.api_requests["bare"] == measured.calls["bare"] + measured.calls["bare-aa"]
    for name in ("project", "project-sql", "project-dpop", "authlib", "flask-dance"):
        assert measured.api_requests[name] == measured.calls[name] > 2
        # one sign-in each, plus the project's own check call before the section
        assert stats[name]["token_requests"] == 1
        assert stats[name]["api_requests"] == measured.calls[name] + name.startswith("project")
    # every DPoP call carried a proof that passed: the sign-in's token and profile requests,
    # the check call, the section's calls; the first proofs' signatures were all verified
    assert measured.dpop_requests == {"project-dpop": measured.calls["project-dpop"]}
    assert stats["project-dpop"]["dpop_requests"] == measured.calls["project-dpop"] + 3
    proofs = stats["project-dpop"]["dpop_requests"]
    verified = stats["project-dpop"]["dpop_signatures_verified"]
    assert min(proofs, provider_server.VERIFY_FIRST) <= verified <= proofs
    assert all(stats[name]["dpop_requests"] == 0 for name in ("project", "bare", "authlib"))
    lines = api_calls.requests_lines(measured)
    assert any(line.split()[0] == "project-sql" for line in lines[1:-3])
    assert any("DPoP proofs checked" in line for line in lines)


def test_the_provider_server_checks_dpop_proofs() -> None:
    key = dpop.DPoPKey.generate()
    stats = provider_server.Stats()
    url = "http://127.0.0.1:5000/api/me"

    def check(proof: str, method: str = "GET", token: str | None = "at.c.1") -> str | None:
        return provider_server.check_proof(stats, "c", proof, method, url, token)

    good = dpop.proof(key, "GET", url, access_token="at.c.1")
    assert check(good) == key.thumbprint
    assert check(good) is None  # a replayed jti
    assert check(dpop.proof(key, "GET", url, access_token="at.c.2")) is None  # ath
    assert check(dpop.proof(key, "POST", url, access_token="at.c.1")) is None  # htm
    assert check(dpop.proof(key, "GET", url + "x", access_token="at.c.1")) is None  # htu
    assert check(dpop.proof(key, "GET", url), token=None) == key.thumbprint  # no ath wanted
    signed = dpop.proof(key, "GET", url, access_token="at.c.1").rsplit(".", 1)[0]
    other = dpop.proof(key, "GET", url, access_token="at.c.1").rsplit(".", 1)[1]
    assert check(f"{signed}.{other}") is None  # claims that pass, a signature of others
    assert stats.dpop["c"] == stats.verified["c"] == 2


def test_the_provider_server_par_endpoint_answers_authenticated_pushes() -> None:
    stats = provider_server.Stats()
    form = {
        "response_type": "code",
        "client_id": "c",
        "redirect_uri": "http://localhost/cb",
        "state": "s",
        "code_challenge": "x" * 43,
        "code_challenge_method": "S256",
    }
    secret = {"client_secret": provider_server.CLIENT_SECRET}
    status, body = provider_server.pushed_request(stats, form | secret, "")
    assert status == "201 Created"
    answer = json.loads(body)
    assert answer["expires_in"] == 60
    assert answer["request_uri"].startswith(provider_server.REQUEST_URI_PREFIX)
    basic = base64.b64encode(f"c:{provider_server.CLIENT_SECRET}".encode()).decode()
    again = provider_server.pushed_request(stats, form, f"Basic {basic}")
    assert again[0] == "201 Created"
    assert json.loads(again[1])["request_uri"] != answer["request_uri"]  # fresh each time
    wrong = {"client_secret": "not-the-secret"}
    assert provider_server.pushed_request(stats, form | wrong, "")[0] == "401 Unauthorized"
    assert provider_server.pushed_request(stats, form, "")[0] == "401 Unauthorized"
    plain = form | secret | {"code_challenge_method": "plain"}
    assert provider_server.pushed_request(stats, plain, "")[0] == "400 Bad Request"
    assert stats.pushed == {"c": 2}


def test_one_round_of_the_par_section() -> None:
    with inprocess.provider_server() as server:
        measured = par_start.measure(server, rounds=1, batch_s=0.01, warm_up=2)
        stats = server.stats()
    rounds = measured.rounds
    assert list(rounds.rates) == list(par_start.CONTENDERS)
    assert all(rates[0] > 0 for rates in rounds.rates.values())
    # every start with PAR pushed once, every bare round trip too (after a start and back to
    # back, the same number each), the start without PAR none
    assert measured.pushes["project"] == 0
    assert 2 * measured.pushes["project-par"] == measured.pushes["round-trip"] > 4
    assert stats["project-par"]["par_requests"] == measured.pushes["project-par"]
    summary = measured.summary()
    assert summary["bare_round_trip_us"] > 0
    assert len(summary["extra_in_round_trips"]) == len(summary["aa_in_round_trips"]) == 1
    assert summary["with_over_without"] > 0
    check = par_start.check(measured)
    assert check.kind == "at most"
    assert check.target == par_start.TARGET
    lines = par_start.table(measured)
    assert lines[0].startswith("sign-in start with and without PAR")
    assert any(line.startswith("  with PAR / without PAR: ") for line in lines)
    assert any("extra - round trip" in line for line in lines)


def test_one_round_of_the_buttons_section() -> None:
    rounds = buttons.measure(rounds=1, batch_s=0.01)
    assert list(rounds.rates) == list(buttons.CONTENDERS)
    assert all(rates[0] > 0 for rates in rounds.rates.values())
    check = buttons.check(rounds)
    assert check.kind == "at most"
    assert check.target == buttons.TARGET_MS
    lines = buttons.table(rounds)
    assert lines[0].startswith("a page with and without every sign-in button")
    assert any(line.startswith("  extra per page with the buttons: ") for line in lines)


def test_a_page_without_its_buttons_invalidates_the_buttons_section() -> None:
    app = buttons.buttons_app()
    with pytest.raises(inprocess.BenchmarkError, match="/page answered 200"):
        buttons.page_runner(app, "/page", "Sign in with Bluesky")(1)


def test_one_round_of_the_id_token_section() -> None:
    with inprocess.provider_server() as server:
        measured = id_token_sign_in.measure(server, rounds=1, batch_s=0.01, warm_up=2)
        stats = server.stats()
    rounds = measured.rounds
    assert list(rounds.rates) == list(id_token_sign_in.CONTENDERS)
    assert all(rates[0] > 0 for rates in rounds.rates.values())
    assert stats["project"]["token_requests"] > 2  # the code flow did its whole work
    assert measured.page_us  # one value per batch of the rounds (each cut in slices)
    assert all(us > 0 for us in measured.page_us)
    check = id_token_sign_in.check(measured)
    assert (check.kind, check.target) == ("at most", id_token_sign_in.TARGET)
    lines = id_token_sign_in.table(measured)
    assert lines[0].startswith("ID-token sign-in against a whole code-flow sign-in")
    assert any("id-token time / code-flow time" in line for line in lines)


def test_an_id_token_sign_in_that_fails_invalidates_the_section() -> None:
    with id_token_sign_in.issuer() as signer:
        app = id_token_sign_in.id_token_app(signer.url, "refusing")
        other = id_token_sign_in.Issuer.__new__(id_token_sign_in.Issuer)
        other.key = RSAKey.generate_key(2048, parameters={"kid": "bench-1"})
        other.url = signer.url  # the right issuer, a key it does not publish
        with pytest.raises(inprocess.BenchmarkError, match="ID-token sign-in answered 400"):
            id_token_sign_in.id_token_runner(app, other)(1)


def test_one_round_of_the_session_section(tmp_path: Path) -> None:
    rounds = session_check.measure(tmp_path, rounds=1, batch_s=0.01)
    assert list(rounds.rates) == list(session_check.CONTENDERS)
    assert all(rates[0] > 0 for rates in rounds.rates.values())
    checks = session_check.checks(rounds)
    assert [check.target for check in checks] == [0.97, 0.8]
    assert session_check.table(rounds)[0].startswith("signed-in page view with the session")


def test_a_check_that_signs_the_browser_out_invalidates_the_session_section(
    tmp_path: Path,
) -> None:
    app = session_check.page_app(tmp_path, "ended", 0)
    run = session_check.signed_in_runner(app)
    with app.app_context():
        app.extensions["social_oauth2"].session_index.end_sessions(
            "bench", "https://op", "alice", None
        )
    with pytest.raises(inprocess.BenchmarkError, match="the page answered"):
        run(1)


def test_a_start_that_does_not_push_invalidates_the_par_section() -> None:
    with inprocess.provider_server() as server:
        not_pushing = par_start.start_runner(make_app("project", server.url), pushed=True)
        with pytest.raises(inprocess.BenchmarkError, match="sign-in start answered 302"):
            not_pushing(1)


def test_an_api_view_that_answers_wrongly_invalidates_the_run() -> None:
    with inprocess.provider_server() as server:
        app = make_app("project", server.url)
        calls: dict[str, int] = {}
        never_signed_in = app.test_client()
        runner = inprocess.api_runner(never_signed_in, "project", API_PATH, "project", calls)
        with pytest.raises(inprocess.BenchmarkError, match="project: the API view answered"):
            runner(1)
        signed_in = inprocess.signed_in_browser(app, START_PATHS["project"], "code")
        wrong = inprocess.api_runner(signed_in, "project", API_PATH, "someone-else", calls)
        with pytest.raises(inprocess.BenchmarkError):
            wrong(1)
    assert calls == {"project": 0}


def test_a_failed_step_invalidates_the_run() -> None:
    with inprocess.provider_server() as server:
        app = make_app("project", server.url)
        with pytest.raises(inprocess.BenchmarkError):
            inprocess.one_flow(app, "/authenticate/unknown", "code")


def test_checks_judge_within_the_tolerance() -> None:
    assert Check("x", target=1.0, measured=1.01, tolerance=0.05).status == "met"
    assert Check("x", target=1.0, measured=0.97, tolerance=0.05).status == "within noise"
    assert Check("x", target=1.0, measured=0.90, tolerance=0.05).status == "MISSED"
    assert Check("x", 2.0, 2.05, 0.05, kind="at most").status == "within noise"
    assert Check("x", 2.0, 2.5, 0.05, kind="at most").status == "MISSED"


def test_one_round_of_the_import_section() -> None:
    result = import_time.measure(rounds=1, runs=1)
    assert list(result["wall_ms"]) == list(import_time.PROGRAMS)
    assert result["over_flask_ms"]["flask"] == 0
    assert all(value > 0 for value in result["wall_ms"].values())
    assert all(value > 0 for value in result["cpu_ms"].values())
    check = import_time.check(result)
    assert check.kind == "at most"
    assert check.target == import_time.TARGET_MS
    assert import_time.table(result)[4].split()[0] == "project"
    with pytest.raises(inprocess.BenchmarkError, match="import child failed"):
        import_time.measure(rounds=1, runs=1, programs={"flask": "import no_such_module_here"})
