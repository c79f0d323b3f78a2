"""Interleaved rounds, per-round ratios, and the run's own noise.

Only ratios measured within one run are compared, never absolute times: machines are shared.
Each round runs every contender once, in an order that rotates from round to round, so slow
phases of the machine hit every contender alike; a ratio is the median of the per-round ratios.

The noise of a step is measured, not assumed: the bare baseline runs twice in every round (as
``bare`` and ``bare-aa``, an A/A comparison of identical work). For a target "A >= T x B":

- ``aa_noise`` = max(|1 - median(aa)|, IQR(aa) / 2), over the per-round ratios ``aa`` of
  ``bare-aa / bare``: how far identical work drifts apart in this run;
- ``spread`` = IQR(r) / 2 / median(r), over the per-round ratios ``r`` of ``A / B``;
- ``tolerance`` = min(max(aa_noise, spread), MAX_TOLERANCE).

The target is met when median(r) >= T; it is "within noise" when median(r) >= T x (1 -
tolerance); otherwise it is missed and the run fails. MAX_TOLERANCE keeps a wildly noisy run
from passing everything.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

#: The largest tolerance granted, however noisy the run.
MAX_TOLERANCE: Final = 0.15

Status = Literal["met", "within noise", "MISSED"]


def median(values: Sequence[float]) -> float:
    """The median."""
    return float(statistics.median(values))


def iqr(values: Sequence[float]) -> float:
    """The interquartile range (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    quartiles = statistics.quantiles(values, n=4, method="inclusive")
    return float(quartiles[2] - quartiles[0])


def ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """Per-round ratios."""
    return [a / b for a, b in zip(numerator, denominator, strict=True) if b > 0]


def aa_noise(aa_ratios: Sequence[float]) -> float:
    """The A/A noise of a step (see the module docstring)."""
    if not aa_ratios:
        return MAX_TOLERANCE
    return max(abs(1 - median(aa_ratios)), iqr(aa_ratios) / 2)


def tolerance(round_ratios: Sequence[float], noise: float) -> float:
    """The tolerance of one comparison: its own spread or the step's A/A noise."""
    spread = iqr(round_ratios) / 2 / median(round_ratios) if round_ratios else MAX_TOLERANCE
    return min(max(noise, spread), MAX_TOLERANCE)


@dataclass
class Check:
    """One target, judged within the run's noise."""

    name: str
    target: float
    measured: float
    tolerance: float
    kind: Literal["at least", "at most"] = "at least"
    detail: str = ""

    @property
    def status(self) -> Status:
        """Met, within noise, or missed."""
        if self.kind == "at least":
            if self.measured >= self.target:
                return "met"
            if self.measured >= self.target * (1 - self.tolerance):
                return "within noise"
            return "MISSED"
        if self.measured <= self.target:
            return "met"
        if self.measured <= self.target * (1 + self.tolerance):
            return "within noise"
        return "MISSED"

    def as_dict(self) -> dict[str, Any]:
        """For the JSON report."""
        return {
            "name": self.name,
            "kind": self.kind,
            "target": self.target,
            "measured": round(self.measured, 4),
            "tolerance": round(self.tolerance, 4),
            "status": self.status,
            "detail": self.detail,
        }


@dataclass
class Rounds:
    """Per-round rates of each contender of one step."""

    unit: str
    rates: dict[str, list[float]] = field(default_factory=dict)
    #: The same operations per second of this process's CPU time: for the in-process steps the
    #: app side's own cost, little disturbed by other processes. Reported, not judged.
    cpu_rates: dict[str, list[float]] = field(default_factory=dict)

    def median_rate(self, contender: str) -> float:
        """The median rate of ``contender``."""
        return median(self.rates[contender])

    def ratio(self, contender: str, other: str) -> float:
        """The median of the per-round ratios ``contender / other``."""
        return median(ratios(self.rates[contender], self.rates[other]))

    def round_ratios(self, contender: str, other: str) -> list[float]:
        """The per-round ratios ``contender / other``."""
        return ratios(self.rates[contender], self.rates[other])

    def noise(self) -> float:
        """The A/A noise (``bare-aa / bare``), when the step has both."""
        if "bare-aa" not in self.rates:
            return MAX_TOLERANCE
        return aa_noise(self.round_ratios("bare-aa", "bare"))

    def check(self, name: str, contender: str, other: str, target: float) -> Check:
        """The target "contender >= target x other" for this step."""
        round_ratios = self.round_ratios(contender, other)
        return Check(
            name=name,
            target=target,
            measured=median(round_ratios),
            tolerance=tolerance(round_ratios, self.noise()),
        )

    def as_dict(self) -> dict[str, Any]:
        """For the JSON report."""
        return {
            "unit": self.unit,
            "median": {name: round(self.median_rate(name), 2) for name in self.rates},
            "rounds": {name: [round(v, 2) for v in values] for name, values in self.rates.items()},
            "aa_noise": round(self.noise(), 4),
            "cpu_median": {
                name: round(median(values), 2) for name, values in self.cpu_rates.items()
            },
        }

    def cpu_ratio(self, contender: str, other: str) -> float:
        """The median of the per-round CPU-time ratios ``contender / other``."""
        return median(ratios(self.cpu_rates[contender], self.cpu_rates[other]))


def run_rounds(
    runners: Mapping[str, Callable[[int], float]],
    rounds: int,
    batch: Mapping[str, int],
    unit: str,
    *,
    slices: int = 3,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> Rounds:
    """Run every contender once per round, the order rotating each round.

    A round is cut into ``slices`` passes over all contenders (each doing its batch /
    ``slices`` operations), so that a burst of load from elsewhere on the machine falls on
    every contender of the round alike.

    :param runners: contender -> function that does ``n`` operations and returns the seconds
        they took (so that set-up outside the timed part is not counted).
    :param batch: contender -> operations per round.
    """
    names = list(runners)
    result = Rounds(unit=unit, rates={name: [] for name in names})
    result.cpu_rates = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        order = names[shift:] + names[:shift]
        wall = dict.fromkeys(names, 0.0)
        cpu = dict.fromkeys(names, 0.0)
        done = dict.fromkeys(names, 0)
        for part in range(slices):
            gc.collect()
            for name in reversed(order) if (index + part) % 2 else order:
                n = max(1, batch[name] // slices)
                cpu_started = time.process_time()
                wall[name] += runners[name](n)
                cpu[name] += time.process_time() - cpu_started
                done[name] += n
        this_round = {name: done[name] / wall[name] if wall[name] > 0 else 0.0 for name in names}
        for name in names:
            result.rates[name].append(this_round[name])
            result.cpu_rates[name].append(done[name] / cpu[name] if cpu[name] > 0 else 0.0)
        if on_round is not None:
            on_round(index, this_round)
    return result


def calibrate(runner: Callable[[int], float], seconds: float, *, minimum: int = 20) -> int:
    """Operations that take about ``seconds`` with ``runner``."""
    n = 10
    while True:
        took = runner(n)
        if took >= 0.05 or n >= 100_000:
            break
        n *= 4
    return max(minimum, int(n * seconds / max(took, 1e-9)))


def timed(function: Callable[[], object], repeat: int) -> float:
    """Seconds for ``repeat`` calls of ``function``."""
    started = time.perf_counter()
    for _ in range(repeat):
        function()
    return time.perf_counter() - started
