"""The test helpers themselves, where they hold a promise of their own."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import pytest
from helpers import child_process, in_threads, stop_process

TESTS: Final = Path(__file__).parent

#: The modules of tests/ that are not test modules, each one thing. Shared helpers go into
#: helpers.py; a new module here is a deliberate choice.
SUPPORT_MODULES: Final = {
    "conftest": "fixtures, nothing else",
    "helpers": "the helpers and constants tests share",
    "fault_server": "a real HTTP(S) server on loopback that misbehaves on demand",
    "postgres_server": "a throwaway PostgreSQL server",
    "multiprocess_support": "gunicorn, nginx and simulated browsers for the multiprocess tests",
    "multiprocess_app": "the app those gunicorn processes serve",
    "token_refresh_child": "one process of the two-process refresh test",
    "provider_sign_in": "the recorded-answer sign-in harness of the built-in providers",
    "provider_cases": "the one table of built-in provider cases that harness runs",
    "fuzz_targets": "the atheris fuzz targets",
    "node_install": "Node.js 22 and npm for those two: cache, npm's environment, failed installs",
    "oidc_provider_server": "panva's oidc-provider on loopback (PAR, DPoP, JWT client auth)",
    "atproto_server": "the AT Protocol reference PDS and a PLC directory on loopback (Bluesky)",
    "dns_server": "a real DNS server on loopback answering TXT records (Bluesky handles)",
    "vendor_brand_marks": "fetches the sign-in buttons' brand marks from the CC0 icon packages",
}

#: A child that ignores Ctrl-C and SIGTERM, as a wedged server would.
STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(600)
"""


def test_a_child_that_ignores_sigint_and_sigterm_is_still_stopped_in_bounded_time() -> None:
    with child_process([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        started = time.monotonic()
        stop_process(process, grace=0.5)
        elapsed = time.monotonic() - started
    assert process.returncode is not None
    assert process.returncode < 0  # killed by a signal, since it ignored the polite ones
    assert elapsed < 5, elapsed


def test_an_exception_in_the_block_still_stops_the_child() -> None:
    started = time.monotonic()
    try:
        with child_process(
            [sys.executable, "-c", STUBBORN], grace=0.5, stdout=subprocess.PIPE
        ) as process:
            assert process.stdout is not None
            process.stdout.readline()
            raise KeyboardInterrupt  # as Ctrl-C in the test run would
    except KeyboardInterrupt:
        pass
    assert process.returncode is not None
    assert time.monotonic() - started < 10


def test_a_well_behaved_child_ends_at_ctrl_c() -> None:
    code = (
        "import time\ntry:\n    print('ready', flush=True)\n    time.sleep(600)\n"
        "except KeyboardInterrupt:\n    print('bye')"
    )
    with child_process([sys.executable, "-c", code], stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        stop_process(process, grace=10)
        assert process.stdout.read() == "bye\n"
    assert process.returncode == 0


def test_in_threads_runs_every_worker_at_once_and_raises_a_failure_here() -> None:
    ran: list[int] = []
    in_threads(ran.append, 6)
    assert sorted(ran) == list(range(6))

    def third_fails(index: int) -> None:
        if index == 2:
            raise LookupError("worker 2")

    with pytest.raises(LookupError, match="worker 2"):
        in_threads(third_fails, 4)


def test_conftest_holds_fixtures_only() -> None:
    tree = ast.parse((TESTS / "conftest.py").read_text(encoding="utf-8"))
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert functions
    for function in functions:
        decorators = [ast.unparse(decorator) for decorator in function.decorator_list]
        assert any(text.startswith("pytest.fixture") for text in decorators), function.name
    assert not [node.name for node in tree.body if isinstance(node, ast.ClassDef)]


def test_shared_helpers_live_in_one_module() -> None:
    support = {path.stem for path in TESTS.glob("*.py") if not path.stem.startswith("test_")}
    assert support == set(SUPPORT_MODULES)
