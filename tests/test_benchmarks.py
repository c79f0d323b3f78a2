"""The benchmark code still runs: a tiny configuration load and one whole-flow round.

Timings are not asserted (machines are shared); the structure of the results and the success of
every flow are.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import config_load, inprocess, report  # noqa: E402
from benchmarks.apps import START_PATHS, make_app  # noqa: E402
from benchmarks.stats import Check, run_rounds  # noqa: E402


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
    }
    assert cost.cookies_set >= 1
    assert cost.set_cookie_bytes > cost.cookie_bytes_sent > 0


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
