"""``python -m benchmarks [--short]``: every measurement in one process run, then the verdict.

Exit status: 0 when every target is met or missed by no more than the run's own noise, 1 when a
target is missed by more, 2 when a contender failed to do the work (the run is invalid).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

from flask import Flask

from . import (
    api_calls,
    buttons,
    config_load,
    gunicorn_load,
    id_token_sign_in,
    import_time,
    inprocess,
    par_start,
    report,
    session_check,
)
from .apps import (
    BARE_URLLIB3,
    CONTENDERS,
    PROJECT_LOADED,
    PROJECT_NONE,
    START_PATHS,
    allow_peers_insecure_transport,
    make_app,
)
from .stats import Check, Rounds, calibrate, median, run_rounds, tolerance

#: The whole flow's extra contenders, not in the redirect step: the floor, and the project
#: keeping no token.
FLOW_ONLY: Final = (BARE_URLLIB3, PROJECT_NONE)
RESULTS_JSON: Final = Path(__file__).parent / "results" / "latest.json"
PEER_ENV: Final = ("AUTHLIB_INSECURE_TRANSPORT", "OAUTHLIB_INSECURE_TRANSPORT")
#: A DPoP-bound API call costs at most 1.5x a bearer one: a rate ratio of at least 1 / 1.5.
DPOP_TARGET: Final = 0.667


@dataclass(frozen=True)
class Plan:
    """How much of each measurement a run does."""

    rounds: int
    redirect_batch_s: float
    flow_batch_s: float
    api_batch_s: float
    load_rounds: int
    load_batch_s: float
    load_clients: int
    memory_flows: int
    config_sizes: tuple[int, ...]
    config_rounds: int
    import_rounds: int
    import_runs: int


FULL: Final = Plan(
    rounds=15,
    redirect_batch_s=0.3,
    flow_batch_s=0.5,
    api_batch_s=0.4,
    load_rounds=7,
    load_batch_s=1.0,
    load_clients=8,
    memory_flows=100_000,
    config_sizes=(10, 100, 1_000, 10_000),
    config_rounds=7,
    import_rounds=15,
    import_runs=5,
)
SHORT: Final = Plan(
    rounds=7,
    redirect_batch_s=0.12,
    flow_batch_s=0.2,
    api_batch_s=0.25,
    load_rounds=5,
    load_batch_s=0.35,
    load_clients=8,
    memory_flows=20_000,
    config_sizes=(10, 100, 1_000, 10_000),
    config_rounds=5,
    import_rounds=7,
    import_runs=3,
)
SECTIONS: Final = (
    *("redirect", "flow", "api", "par", "idtoken", "session", "gunicorn", "cost", "config"),
    *("import", "buttons"),
)


def log(message: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(message, file=sys.stderr, flush=True)


def in_process_step(
    step: str, apps: dict[str, Flask], plan: Plan, *, rounds: int | None = None
) -> Rounds:
    """The redirect step or the whole flow of every app, interleaved round by round."""
    make_runner: Callable[[Flask, str], Callable[[int], float]] = (
        inprocess.redirect_runner if step == "redirect" else inprocess.flow_runner
    )
    runners = {name: make_runner(app, START_PATHS[_kind(name)]) for name, app in apps.items()}
    seconds = plan.redirect_batch_s if step == "redirect" else plan.flow_batch_s
    for runner in runners.values():  # warm up every contender
        runner(20)
    n = calibrate(runners["bare"], seconds)
    batch = dict.fromkeys(runners, n)
    unit = "ops/s" if step == "redirect" else "flows/s"
    return run_rounds(
        runners,
        rounds or plan.rounds,
        batch,
        unit,
        on_round=lambda i, r: log(f"  {step} round {i + 1}: " + _brief(r)),
    )


def _kind(name: str) -> str:
    return "bare" if name == "bare-aa" else name


def _brief(rates: dict[str, float]) -> str:
    return ", ".join(f"{name} {rate:,.0f}" for name, rate in rates.items())


def faster_peer_check(rounds: Rounds, name: str, target: float) -> Check:
    """``project >= target x`` the faster of the peers, round by round."""
    faster = [max(a, b) for a, b in zip(*(rounds.rates[p] for p in report.PEERS), strict=True)]
    round_ratios = [p / f for p, f in zip(rounds.rates["project"], faster, strict=True)]
    return Check(
        name=name,
        target=target,
        measured=median(round_ratios),
        tolerance=tolerance(round_ratios, rounds.noise()),
    )


def run(plan: Plan, sections: Sequence[str], command: str) -> tuple[dict[str, Any], list[str]]:
    """Every measurement; returns the JSON report and the printed table."""
    started = time.monotonic()
    results: dict[str, Any] = {}
    checks: list[Check] = []
    table: list[str] = []
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(inprocess.provider_server())
        # The project first, before the peers' insecure-transport switches exist.
        if any(os.environ.get(name) for name in PEER_ENV):
            raise inprocess.BenchmarkError(f"unset {' and '.join(PEER_ENV)} to run this")
        apps: dict[str, Flask] = {"project": make_app("project", server.url)}
        inprocess.one_flow(apps["project"], START_PATHS["project"], "check-without-peer-env")
        api_contenders: list[api_calls.Contender] = []
        if "api" in sections:  # signed in, and one API call each, without them too
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-api-"))
            api_contenders = api_calls.project_contenders(server.url, Path(directory))
        allow_peers_insecure_transport()
        apps["bare"] = make_app("bare", server.url)
        apps["bare-aa"] = make_app("bare", server.url)
        apps[BARE_URLLIB3] = make_app(BARE_URLLIB3, server.url)
        apps[PROJECT_NONE] = make_app(PROJECT_NONE, server.url)
        for name in CONTENDERS[2:]:
            apps[name] = make_app(name, server.url)

        if "redirect" in sections:
            log("redirect step, in process")
            # bare-urllib3's redirect step is bare's, and project-none's the project's (no
            # token is kept before the callback): they run in the whole flow only
            redirect_apps = {name: app for name, app in apps.items() if name not in FLOW_ONLY}
            redirect_apps[PROJECT_LOADED] = make_app(PROJECT_LOADED, server.url)
            rounds = in_process_step("redirect", redirect_apps, plan)
            results["redirect"] = rounds.as_dict()
            table += [*report.rate_table("redirect step, in process", rounds, show_cpu=True), ""]
            checks += [
                rounds.check("redirect step: project / bare Flask view", "project", "bare", 0.95),
                rounds.check("redirect step: project / Authlib", "project", "authlib", 1.0),
                rounds.check("redirect step: project / Flask-Dance", "project", "flask-dance", 1.0),
                rounds.check(
                    "redirect step: a provider loaded at runtime (cached) / configured",
                    PROJECT_LOADED,
                    "project",
                    0.95,
                ),
            ]

        if "flow" in sections:
            log("whole flow, in process, real HTTP to the provider server")
            before = server.stats()
            rounds = in_process_step("flow", apps, plan)
            after = server.stats()
            results["flow"] = rounds.as_dict()
            results["flow"]["provider_requests"] = _difference(after, before)
            table += [*report.rate_table("whole flow, in process", rounds, show_cpu=True)]
            table += _floor_lines(rounds)
            table += _pkce_lines(results["flow"]["provider_requests"])
            checks += [
                rounds.check(
                    "whole flow: project / bare pooled requests.Session", "project", "bare", 0.85
                ),
                rounds.check(
                    "whole flow: project-none / bare pooled urllib3 (the floor; both keep"
                    " the profile, no token)",
                    PROJECT_NONE,
                    BARE_URLLIB3,
                    0.9,
                ),
                faster_peer_check(
                    rounds, "whole flow: project / faster of Authlib, Flask-Dance", 1.5
                ),
            ]

        if "api" in sections:
            log("api call: a view calling the provider server's API, in process, real HTTP")
            api_contenders += api_calls.peer_contenders(server.url)
            measured = api_calls.measure(
                server,
                api_contenders,
                plan.rounds,
                plan.api_batch_s,
                on_round=lambda i, r: log(f"  api call round {i + 1}: " + _brief(r)),
            )
            rounds = measured.rounds
            results["api"] = rounds.as_dict()
            results["api"]["api_requests"] = measured.api_requests
            results["api"]["calls"] = measured.calls
            title = "api call, in process, real HTTP to the API server"
            table += [*report.rate_table(title, rounds, show_cpu=True)]
            dpop_cpu = rounds.cpu_ratio("project-dpop", "project")
            table += [f"  (by this process's CPU time: project-dpop /project {dpop_cpu:.2f}x)", ""]
            table += api_calls.requests_lines(measured)
            checks += [
                rounds.check("api call: project / bare pooled view", "project", "bare", 0.9),
                faster_peer_check(
                    rounds, "api call: project / faster of Authlib, Flask-Dance", 1.3
                ),
                rounds.check(
                    "api call: project-dpop / project (DPoP costs at most 1.5x)",
                    "project-dpop",
                    "project",
                    DPOP_TARGET,
                ),
            ]

        if "par" in sections:
            log("sign-in start with and without PAR, in process, real HTTP to the PAR endpoint")
            pushed = par_start.measure(
                server,
                plan.rounds,
                plan.redirect_batch_s,
                on_round=lambda i, r: log(f"  par round {i + 1}: " + _brief(r)),
            )
            results["par"] = pushed.rounds.as_dict() | pushed.summary()
            table += par_start.table(pushed)
            checks.append(par_start.check(pushed))

        if "idtoken" in sections:
            log("ID-token sign-in against a whole code-flow sign-in, in process")
            signed_in = id_token_sign_in.measure(
                server,
                plan.rounds,
                plan.flow_batch_s,
                on_round=lambda i, r: log(f"  idtoken round {i + 1}: " + _brief(r)),
            )
            results["idtoken"] = signed_in.rounds.as_dict() | {"page_us": signed_in.page_us}
            table += id_token_sign_in.table(signed_in)
            checks.append(id_token_sign_in.check(signed_in))

        if "session" in sections:
            log("signed-in page view with the session check (session index on SQLite)")
            with tempfile.TemporaryDirectory() as directory:
                viewed = session_check.measure(
                    Path(directory),
                    plan.rounds,
                    plan.redirect_batch_s,
                    on_round=lambda i, r: log(f"  session round {i + 1}: " + _brief(r)),
                )
            results["session"] = viewed.as_dict()
            table += session_check.table(viewed)
            checks += session_check.checks(viewed)

        if "gunicorn" in sections:
            log("gunicorn, 2 workers, bounded concurrent load")
            results["gunicorn"] = {}
            with gunicorn_load.servers(["project", "bare"], ["sync", "gthread"], server.url) as up:
                for worker_class in ("sync", "gthread"):
                    for step in ("redirect", "flow"):
                        rounds = _load_step(up, worker_class, step, plan)
                        key = f"{worker_class} {step}"
                        results["gunicorn"][key] = rounds.as_dict()
                        what = "redirect step" if step == "redirect" else "whole flow"
                        title = f"gunicorn {worker_class}, {what}"
                        table += [*report.rate_table(title, rounds), ""]
                        checks.append(
                            rounds.check(f"gunicorn {key}: project / bare", "project", "bare", 0.9)
                        )

        memory: dict[str, Any] | None = None
        if "cost" in sections:
            log(f"per-flow cost; memory over {plan.memory_flows:,} flows")
            costs = {
                name: vars(inprocess.one_flow(app, START_PATHS[_kind(name)], "cost"))
                for name, app in apps.items()
                if name != "bare-aa"
            }
            samples = inprocess.memory_over_flows(
                apps["project"], START_PATHS["project"], plan.memory_flows
            )
            memory = inprocess.memory_summary(samples)
            results["cost"] = {"cookies": costs, "memory": memory}
            table += [*report.cost_table(costs, memory), ""]
            allowed_kib = max(1024.0, 10 * (memory["flows_last"] - memory["flows_first"]) / 1024)
            checks.append(
                Check(
                    name=(
                        f"memory flat: RSS growth from {memory['flows_first']:,} to "
                        f"{memory['flows_last']:,} flows, KiB"
                    ),
                    target=allowed_kib,
                    measured=memory["growth_kib"],
                    tolerance=0.0,
                    kind="at most",
                    detail="at most max(1 MiB, 10 bytes per flow)",
                )
            )

    if "buttons" in sections:
        log("a page with and without every sign-in button, in process")
        drawn = buttons.measure(
            plan.rounds,
            plan.redirect_batch_s,
            on_round=lambda i, r: log(f"  buttons round {i + 1}: " + _brief(r)),
        )
        results["buttons"] = drawn.as_dict()
        table += buttons.table(drawn)
        checks.append(buttons.check(drawn))

    if "config" in sections:
        log(f"configuration load, {', '.join(map(str, plan.config_sizes))} providers")
        with tempfile.TemporaryDirectory(prefix="bench-config-") as directory:
            config = config_load.measure(Path(directory), plan.config_sizes, plan.config_rounds)
        results["config"] = {str(size): value for size, value in config.items()}
        table += [*report.config_table(config), ""]
        checks += config_load.checks(config)

    if "import" in sections:
        log(f"import, fresh interpreters, {plan.import_rounds} rounds of {plan.import_runs}")
        imported = import_time.measure(
            plan.import_rounds,
            plan.import_runs,
            on_round=lambda i, r: log(
                f"  import round {i + 1}: " + ", ".join(f"{n} {ms:.0f} ms" for n, ms in r.items())
            ),
        )
        results["import"] = imported
        table += [*import_time.table(imported), ""]
        checks.append(import_time.check(imported))

    table += report.checks_table(checks)
    ok = all(check.status != "MISSED" for check in checks)
    data = {
        "command": command,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1),
        "machine": _machine(),
        "plan": vars(plan),
        "results": results,
        "checks": [check.as_dict() for check in checks],
        "ok": ok,
    }
    return data, table


def _load_step(
    up: dict[tuple[str, str], gunicorn_load.Server], worker_class: str, step: str, plan: Plan
) -> Rounds:
    project = gunicorn_load.load_runner(up[("project", worker_class)], step, plan.load_clients)
    bare = gunicorn_load.load_runner(up[("bare", worker_class)], step, plan.load_clients)
    runners = {"project": project, "bare": bare, "bare-aa": bare}
    for runner in (project, bare):
        runner(4 * plan.load_clients)  # warm up: connections, worker imports, pools
    n = calibrate(bare, plan.load_batch_s, minimum=4 * plan.load_clients)
    return run_rounds(
        runners,
        plan.load_rounds,
        dict.fromkeys(runners, n),
        "req/s",
        on_round=lambda i, r: log(f"  gunicorn {worker_class} {step} round {i + 1}: " + _brief(r)),
    )


def _difference(
    after: dict[str, dict[str, int]], before: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    differences = {
        client: {key: value - before.get(client, {}).get(key, 0) for key, value in counts.items()}
        for client, counts in after.items()
    }
    return {client: counts for client, counts in differences.items() if any(counts.values())}


def _floor_lines(rounds: Rounds) -> list[str]:
    """The project beside the floor: sign-in only (judged) and with its default token store
    (shown: the floor keeps no token), and what keeping the token costs per flow."""
    lines = []
    for name, note in ((PROJECT_NONE, "judged"), ("project", "not judged: it also keeps tokens")):
        lines.append(
            f"  {name} / bare-urllib3 {rounds.ratio(name, BARE_URLLIB3):.3f}x ({note}; by this"
            f" process's CPU time {rounds.cpu_ratio(name, BARE_URLLIB3):.3f}x)"
        )
    kept = median(
        [
            1e6 / with_tokens - 1e6 / without
            for with_tokens, without in zip(
                rounds.rates["project"], rounds.rates[PROJECT_NONE], strict=True
            )
        ]
    )
    lines.append(f"  keeping the encrypted tokens in the session: {kept:+.0f} us per flow")
    return [*lines, ""]


def _pkce_lines(requests_seen: dict[str, dict[str, int]]) -> list[str]:
    lines = ["  requests the provider server saw during the whole-flow rounds:"]
    for client, counts in sorted(requests_seen.items()):
        tokens = counts["token_requests"]
        pkce = "PKCE on" if tokens and counts["pkce_token_requests"] == tokens else "no PKCE"
        lines.append(
            f"    {client:<12} {tokens:>7} token, {counts['profile_requests']:>7} profile ({pkce})"
        )
    return [*lines, ""]


def _machine() -> dict[str, Any]:
    packages = ("flask", "werkzeug", "requests", "urllib3", "authlib", "flask-dance", "gunicorn")
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {name: version(name) for name in packages},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks; print the table; write the JSON (and the Markdown copy)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--short", action="store_true", help="the CI version (about 3 minutes)")
    parser.add_argument("--json", type=Path, default=RESULTS_JSON, help="where to write JSON")
    parser.add_argument("--markdown", type=Path, help="also write a Markdown copy of the run")
    parser.add_argument(
        "--only", action="append", choices=SECTIONS, help="run only these sections (repeatable)"
    )
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "benchmarks", *(sys.argv[1:] if argv is None else argv)])
    plan = SHORT if args.short else FULL
    try:
        data, table = run(plan, args.only or SECTIONS, command)
    except inprocess.BenchmarkError as error:
        log(f"benchmark invalid: {error}")
        return 2
    print("\n".join(table))
    report.write_json(args.json, data)
    if args.markdown is not None:
        report.write_markdown(args.markdown, data, table)
    log(f"wrote {args.json}; {data['duration_s']:.0f} s")
    return 0 if data["ok"] else 1
