"""Configuration load and validation beside PyYAML's own parse of the same file.

For each size, a providers file of that many blocks (every key of the specification, https
endpoints, maps included) is written once. Each round times, in alternating order:

- ``yaml``: reading the file and ``yaml.load(text, Loader=StringScalarLoader)``, the loader
  class the project uses (libyaml's parser when PyYAML has it);
- ``load``: ``flask_social_oauth2.config.blocks.load_settings`` with
  ``SOCIAL_OAUTH2_PROVIDERS_FILE``, which reads and parses the same file the same way, then
  validates every block.

Before each timing the garbage collector runs, and it stays off during the timing: what a
collection costs depends on everything else alive in the benchmark process, not on the code
measured. Both timings include freeing the parsed YAML.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from flask_social_oauth2.config.blocks import StringScalarLoader, load_settings

from .stats import Check, iqr, median, ratios


def provider_block(index: int) -> str:
    """One provider block in YAML."""
    return f"""provider-{index}:
  authorizationURL: https://login{index}.example.com/oauth2/v2/authorize
  accessTokenURL: https://login{index}.example.com/oauth2/v2/token
  apiURL: https://api{index}.example.com/v1/me
  redirectURL: /authenticate/provider-{index}
  clientID: "{index:012d}"
  clientSecret: ${{BENCH_SECRET}}-{index}
  scope: openid profile email
  authorizationParams:
    prompt: consent
    access_type: offline
  accessTokenParams:
    audience: https://api{index}.example.com
  customProperties:
    tokenEndpointAuthMethod: client_secret_post
"""


def write_providers_file(directory: Path, count: int) -> Path:
    """A providers file with ``count`` blocks."""
    path = directory / f"providers-{count}.yaml"
    path.write_text("".join(provider_block(i) for i in range(count)), encoding="utf-8")
    return path


@contextmanager
def _collected_heap() -> Iterator[None]:
    """Collect, then keep the collector off while timing: what a collection costs depends on
    everything else alive in the benchmark process, not on the code measured (and with a
    frozen heap, CPython's full collections turn quadratic on a 10,000-provider parse)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def time_yaml(path: Path, expected: int) -> float:
    """Seconds to read and parse ``path`` with the project's loader class, and to free the
    result (``load_settings`` frees its parsed YAML before it returns, too)."""
    with _collected_heap():
        started = time.perf_counter()
        count = len(yaml.load(path.read_text(encoding="utf-8"), Loader=StringScalarLoader))  # noqa: S506
        took = time.perf_counter() - started
    if count != expected:
        raise RuntimeError(f"PyYAML read {count} blocks, not {expected}")
    return took


def time_load(path: Path, expected: int) -> float:
    """Seconds for ``load_settings`` of ``path``; checks every block was read."""
    environ = {"BENCH_SECRET": "s3cr3t"}
    with _collected_heap():
        started = time.perf_counter()
        settings = load_settings({"SOCIAL_OAUTH2_PROVIDERS_FILE": str(path)}, environ=environ)
        took = time.perf_counter() - started
    if len(settings) != expected:
        raise RuntimeError(f"load_settings read {len(settings)} blocks, not {expected}")
    return took


def measure(directory: Path, sizes: Sequence[int], rounds: int) -> dict[int, dict[str, Any]]:
    """Per size: per-round seconds of ``yaml`` and ``load`` and their ratio."""
    results: dict[int, dict[str, Any]] = {}
    for size in sizes:
        path = write_providers_file(directory, size)
        time_yaml(path, size)  # warm the page cache and the code paths
        time_load(path, size)
        yaml_times: list[float] = []
        load_times: list[float] = []
        for index in range(rounds):
            if index % 2:
                load_times.append(time_load(path, size))
                yaml_times.append(time_yaml(path, size))
            else:
                yaml_times.append(time_yaml(path, size))
                load_times.append(time_load(path, size))
        round_ratios = ratios(load_times, yaml_times)
        results[size] = {
            "providers": size,
            "file_bytes": path.stat().st_size,
            "yaml_s": [round(t, 6) for t in yaml_times],
            "load_s": [round(t, 6) for t in load_times],
            "yaml_median_s": round(median(yaml_times), 6),
            "load_median_s": round(median(load_times), 6),
            "yaml_us_per_provider": round(median(yaml_times) / size * 1e6, 2),
            "load_us_per_provider": round(median(load_times) / size * 1e6, 2),
            "ratio": round(median(round_ratios), 4),
            "ratio_rounds": [round(r, 4) for r in round_ratios],
        }
        path.unlink()
    return results


def checks(results: dict[int, dict[str, Any]], limit: float = 2.0) -> list[Check]:
    """``load <= limit x yaml`` at every size; the ratio does not grow with the size."""
    found: list[Check] = []
    spreads: list[float] = []
    for size, result in results.items():
        round_ratios = result["ratio_rounds"]
        spread = iqr(round_ratios) / 2 / median(round_ratios)
        spreads.append(spread)
        found.append(
            Check(
                name=f"config load, {size:,} providers: load_settings / PyYAML parse",
                target=limit,
                measured=result["ratio"],
                tolerance=min(spread, 0.15),
                kind="at most",
            )
        )
    sizes = sorted(results)
    if len(sizes) >= 3:
        small, large = sizes[1], sizes[-1]
        growth = results[large]["ratio"] / results[small]["ratio"]
        found.append(
            Check(
                name=f"config load grows linearly: ratio at {large:,} / ratio at {small:,}",
                target=1.5,
                measured=growth,
                tolerance=min(max(spreads), 0.15),
                kind="at most",
                detail="the load/parse ratio must not grow with the number of providers",
            )
        )
    return found
