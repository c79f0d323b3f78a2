"""The test helpers themselves, where they hold a promise of their own."""

from __future__ import annotations

import subprocess
import sys
import time

from helpers import child_process, stop_process

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
