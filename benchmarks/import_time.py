"""The "import" section: what importing the package adds to a fresh interpreter's start.

Each round runs every contender's program in fresh ``python -c`` subprocesses (the same
interpreter, the repository as the working directory, so that its package is the one imported),
in an order that rotates from round to round, ``runs`` times each, interleaved. A contender's
time in a round is the shortest of its runs' wall times (process start to exit, as the parent
sees it: a start is a fixed cost plus whatever the machine's other work adds, so the shortest
run is the least disturbed); a round's figure is that time minus ``flask``'s of the same round,
in milliseconds, and the result is the median of the rounds' figures.

- ``flask``: ``import flask``, the baseline;
- ``flask-aa``: the same program again, for the A/A noise;
- ``project``: ``import flask; from flask_social_oauth2 import SocialOAuth2`` (judged: issue 13,
  at most 40 ms over Flask's own import);
- ``project-app``: that, then an app with one provider block and ``SocialOAuth2(app)``: what an
  app's start pays (reported, not judged).

The CPU time of each child (user + system, from ``os.wait4``) is reported beside, the same way
(shortest of a round's runs, over ``flask``'s, median of rounds): little disturbed by other
processes; not judged.

The A/A noise is max(|median(aa)|, IQR(aa) / 2) over the per-round ``flask-aa - flask``
differences (ms); the tolerance of the target is that noise or half the IQR of the project's
own differences, whichever is larger, as a fraction of the target, capped as elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, Final

from .inprocess import ROOT, BenchmarkError
from .stats import MAX_TOLERANCE, Check, iqr, median

#: At most this many milliseconds over Flask's own import (issue 13).
TARGET_MS: Final = 40.0

_APP: Final = """
app = flask.Flask("bench")
app.config.update(
    SECRET_KEY="bench-secret-key-0123456789abcdef",
    SOCIAL_OAUTH2_PROVIDERS={
        "bench": {
            "authorizationURL": "https://login.example.com/oauth2/authorize",
            "accessTokenURL": "https://login.example.com/oauth2/token",
            "apiURL": "https://api.example.com/v1/me",
            "redirectURL": "/authenticate/bench",
            "clientID": "bench-client",
            "clientSecret": "bench-client-secret",
            "scope": "profile email",
        }
    },
)
SocialOAuth2(app)
"""
_PROJECT: Final = "import flask\nfrom flask_social_oauth2 import SocialOAuth2\n"
#: The contenders in table order, and the statements each one's child times.
PROGRAMS: Final = {
    "flask": "import flask\n",
    "flask-aa": "import flask\n",
    "project": _PROJECT,
    "project-app": _PROJECT + _APP,
}
#: Reported, not judged.
UNJUDGED: Final = ("project-app",)


def runner(statements: str) -> Callable[[], tuple[float, float]]:
    """One fresh interpreter running ``statements``: (wall seconds, CPU seconds).

    :raises BenchmarkError: when the child fails.
    """
    command = [sys.executable, "-c", statements]
    # bytecode caches written and used, as in an installed package
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def run() -> tuple[float, float]:
        started = time.perf_counter()
        child = subprocess.Popen(
            command,
            cwd=ROOT,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        assert child.stderr is not None
        errors = child.stderr.read().decode(errors="replace")
        child.stderr.close()
        if child.returncode != 0:
            raise BenchmarkError(f"import child failed: {errors.strip()[-300:]}")
        return wall, usage.ru_utime + usage.ru_stime

    return run


def measure(
    rounds: int,
    runs: int,
    *,
    programs: dict[str, str] | None = None,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, Any]:
    """Every program, ``runs`` times a round, interleaved; per-round medians and differences
    to ``flask`` (ms).

    :raises BenchmarkError: when a child fails.
    """
    programs = PROGRAMS if programs is None else programs
    runners = {name: runner(statements) for name, statements in programs.items()}
    for run in runners.values():  # warm up: bytecode caches, the file system's cache
        run()
    names = list(runners)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        order = names[shift:] + names[:shift]
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for part in range(runs):
            for name in reversed(order) if (index + part) % 2 else order:
                samples[name].append(runners[name]())
        for name in names:
            wall[name].append(1000 * min(w for w, _ in samples[name]))
            cpu[name].append(1000 * min(c for _, c in samples[name]))
        if on_round is not None:
            on_round(index, {name: wall[name][-1] for name in names})
    over = {name: [w - f for w, f in zip(wall[name], wall["flask"], strict=True)] for name in names}
    cpu_over = {
        name: [c - f for c, f in zip(cpu[name], cpu["flask"], strict=True)] for name in names
    }
    aa = over.get("flask-aa", [])
    noise = max(abs(median(aa)), iqr(aa) / 2) if aa else TARGET_MS * MAX_TOLERANCE
    return {
        "unit": "ms",
        "rounds": rounds,
        "runs": runs,
        "wall_ms": {name: round(median(values), 2) for name, values in wall.items()},
        "over_flask_ms": {name: round(median(values), 2) for name, values in over.items()},
        "cpu_ms": {name: round(median(values), 2) for name, values in cpu.items()},
        "cpu_over_flask_ms": {name: round(median(values), 2) for name, values in cpu_over.items()},
        "per_round_over_flask_ms": {
            name: [round(v, 2) for v in values] for name, values in over.items()
        },
        "aa_noise_ms": round(noise, 2),
    }


def check(result: dict[str, Any]) -> Check:
    """The target: importing the package costs at most :data:`TARGET_MS` over Flask's import."""
    over = result["per_round_over_flask_ms"]["project"]
    spread = iqr(over) / 2
    return Check(
        name="import: flask_social_oauth2 over Flask's own import, ms",
        target=TARGET_MS,
        measured=median(over),
        tolerance=min(max(result["aa_noise_ms"], spread) / TARGET_MS, MAX_TOLERANCE),
        kind="at most",
        detail="fresh interpreters; median over rounds of the difference of shortest wall times",
    )


def table(result: dict[str, Any]) -> list[str]:
    """Wall time of each program, and over ``flask``'s; the child's CPU time beside."""
    lines = [
        f"import, fresh interpreters (ms; the shortest of {result['runs']} runs a round, median "
        f"of {result['rounds']} rounds; A/A noise {result['aa_noise_ms']:.1f} ms)",
        f"  {'contender':<14}{'process ms':>12}{'over flask':>12}{'CPU ms':>13}{'over flask':>12}",
    ]
    for name in result["wall_ms"]:
        lines.append(
            f"  {name:<14}{result['wall_ms'][name]:>12.1f}"
            f"{result['over_flask_ms'][name]:>+12.1f}"
            f"{result['cpu_ms'][name]:>13.1f}{result['cpu_over_flask_ms'][name]:>+12.1f}"
        )
    lines.append(
        "  (project: import flask; from flask_social_oauth2 import SocialOAuth2, judged;"
        " project-app: then an app with one provider block and SocialOAuth2(app), not judged;"
        " CPU time not judged)"
    )
    return lines
