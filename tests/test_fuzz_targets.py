"""Run the coverage-guided fuzz targets of tests/fuzz_targets.py for a fixed number of inputs.

Each target runs in a subprocess (libFuzzer takes over the process) with a fixed seed, so a run
is reproducible; a crash or a broken property fails the test with libFuzzer's report, and the
crashing input is left in the test's temporary directory. atheris is part of the ``test`` extra;
its absence is a failure with the install hint, not a skip.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

TARGETS: Final = Path(__file__).with_name("fuzz_targets.py")
RUNS: Final = 50_000
REPO_ROOT: Final = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("target", ["state_cookie", "next_path"])
def test_fuzz_target(target: str, tmp_path: Path) -> None:
    if importlib.util.find_spec("atheris") is None:
        pytest.fail("atheris is needed: `pip install atheris` (in the test extra)", pytrace=False)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    command = [
        sys.executable,
        str(TARGETS),
        target,
        f"-runs={RUNS}",
        "-seed=1",
        "-max_len=4096",
        f"-artifact_prefix={tmp_path}{os.sep}",
    ]
    result = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    report = result.stderr[-4000:]
    assert result.returncode == 0, report
    assert f"Done {RUNS} runs" in result.stderr, report
    assert not list(tmp_path.iterdir()), report  # no crash, leak or timeout artifact
