"""The printed table, the JSON report and the Markdown copy of a run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .stats import Check, Rounds

PEERS = ("authlib", "flask-dance")


def rate_table(
    title: str, rounds: Rounds, baseline: str = "bare", *, show_cpu: bool = False
) -> list[str]:
    """Median rate of each contender and its ratios to the baseline and to each peer."""
    names = list(rounds.rates)
    peers = [peer for peer in PEERS if peer in rounds.rates]
    columns = [f"vs {baseline}"] + [f"vs {peer}" for peer in peers]
    count = len(next(iter(rounds.rates.values())))
    lines = [
        f"{title} ({rounds.unit}, median of {count} rounds; A/A noise {rounds.noise():.1%})",
        f"  {'contender':<14}{rounds.unit:>12}" + "".join(f"{c:>17}" for c in columns),
    ]
    for name in names:
        cells = [f"{rounds.ratio(name, baseline):.2f}x"]
        cells += [f"{rounds.ratio(name, peer):.2f}x" for peer in peers]
        lines.append(
            f"  {name:<14}{rounds.median_rate(name):>12,.0f}" + "".join(f"{c:>17}" for c in cells)
        )
    if show_cpu and rounds.cpu_rates:
        others = [baseline, *peers]
        cpu = ", ".join(f"/{other} {rounds.cpu_ratio('project', other):.2f}x" for other in others)
        lines.append(f"  (by this process's CPU time, not judged: project {cpu})")
    return lines


def config_table(results: dict[int, dict[str, Any]]) -> list[str]:
    """Configuration load beside PyYAML's parse."""
    lines = [
        "configuration load (median seconds; ratio = median of per-round load/yaml)",
        f"  {'providers':>9}{'file':>10}{'yaml s':>10}{'load s':>10}"
        f"{'yaml us/p':>11}{'load us/p':>11}{'ratio':>8}",
    ]
    for size, result in results.items():
        lines.append(
            f"  {size:>9,}{result['file_bytes'] / 1024:>8.0f}KB"
            f"{result['yaml_median_s']:>10.4f}{result['load_median_s']:>10.4f}"
            f"{result['yaml_us_per_provider']:>11.1f}{result['load_us_per_provider']:>11.1f}"
            f"{result['ratio']:>7.2f}x"
        )
    return lines


def cost_table(costs: dict[str, dict[str, int]], memory: dict[str, Any] | None) -> list[str]:
    """Cookies per flow, and resident memory over many flows."""
    lines = [
        "per-flow cost (cookies of one whole flow)",
        f"  {'contender':<14}{'Set-Cookie bytes':>18}{'cookies set':>13}{'bytes sent back':>17}",
    ]
    for name, cost in costs.items():
        lines.append(
            f"  {name:<14}{cost['set_cookie_bytes']:>18}{cost['cookies_set']:>13}"
            f"{cost['cookie_bytes_sent']:>17}"
        )
    if memory is not None:
        lines.append(
            f"  resident memory (project): {memory['rss_first_mib']} MiB after "
            f"{memory['flows_first']:,} flows, {memory['rss_last_mib']} MiB after "
            f"{memory['flows_last']:,} ({memory['growth_kib']:+} KiB, "
            f"{memory['growth_bytes_per_flow']:+} B/flow)"
        )
    return lines


def checks_table(checks: Sequence[Check]) -> list[str]:
    """Each target and its status."""
    lines = ["targets (ratios within this run; tolerance = the run's own noise)"]
    for check in checks:
        sign = ">=" if check.kind == "at least" else "<="
        lines.append(
            f"  {check.status:<13} {check.name}: {check.measured:.3f} "
            f"(target {sign} {check.target:g}, tolerance {check.tolerance:.1%})"
        )
    return lines


def write_json(path: Path, report: dict[str, Any]) -> None:
    """The whole report as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def write_markdown(path: Path, report: dict[str, Any], table: Sequence[str]) -> None:
    """A Markdown copy of a run: the command, the machine, the table."""
    machine = report["machine"]
    text = [
        "# Benchmark results",
        "",
        "A real full run, made with:",
        "",
        "```",
        report["command"],
        "```",
        "",
        f"- date: {report['started']}; duration {report['duration_s']:.0f} s",
        f"- machine: {machine['cpus']} CPUs, {machine['platform']}, Python {machine['python']}",
        f"- versions: {', '.join(f'{k} {v}' for k, v in machine['versions'].items())}",
        f"- result: {'all targets met within noise' if report['ok'] else 'TARGETS MISSED'}",
        "",
        "Only ratios within one run mean anything: the machine is shared. How the rounds, the",
        "ratios and the tolerance are computed: see `benchmarks/README.md`.",
        "",
        "```",
        *table,
        "```",
        "",
    ]
    path.write_text("\n".join(text), encoding="utf-8")
