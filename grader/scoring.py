"""Points: the config file, the credit an item gives for some of its cases passing, and the
formula that turns a time ratio into a share of points."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from grader.isolation import sandbox, sanitizer

DEFAULT_CONFIG = Path(__file__).with_name("config.toml")
# An item's `credit`: "all" = its points only when every case passes (the default);
# "partial" = points x passed cases / cases, rounded to PARTIAL_DECIMALS decimals.
CREDITS = ("all", "partial")
PARTIAL_DECIMALS = 2


class ConfigError(ValueError):
    """The grading config is missing a value or holds an impossible one."""


@dataclass(frozen=True)
class Config:
    items: dict[str, dict]  # item id -> {"title", "points", optional "credit"}
    full_at: float
    zero_at: float
    repeats: int
    warmup: int
    seconds_gpu: float
    seconds_simulator: float
    findings_fail: bool  # does a race or negative index found in the simulator fail a case?
    static_scan_fails: bool = True  # does a library product seen in the source fail the item?
    policy: str = "enforce"  # grader/checks/policy/: "enforce", "strict" or "report"
    sanitizer_tools: tuple[str, ...] = ()  # compute-sanitizer tools run on a GPU; () = off
    sanitizer_findings_fail: bool = False  # does a compute-sanitizer finding fail the item?
    sanitizer_path: str = ""  # the executable; "" = look on PATH and in /usr/local/cuda
    seconds_sanitizer: float = 900.0
    net_full_at: float = 1.2  # full_at of Part 2's speed item ([performance] net_full_at)
    bonus: bool = False  # are the bonus kernels (nnkit.gemm.BONUS_KERNELS) graded?
    seconds_mpi: float = 90.0  # one MPI job of Part 3 ([mpi] seconds)
    mpiexec: str = ""  # "": beside the grading interpreter, else on the PATH
    # The grading run's secret: every case's inputs are generated from it (mixed with the
    # case's number) by the grader alone, and no job ever sees it. Drawn afresh for each
    # run unless `--seed` fixes it (to reproduce a run exactly).
    secret: int = 0
    # Items graded by hand (the reports), from an instructor's CSV: id -> {"title", "points"}.
    manual: dict[str, dict] = field(default_factory=dict)

    def _spec(self, item: str) -> dict:
        return self.items[item] if item in self.items else self.manual[item]

    def points(self, item: str) -> float:
        return float(self._spec(item)["points"])

    def title(self, item: str) -> str:
        return str(self._spec(item).get("title", item))

    def credit(self, item: str) -> str:
        """"all" or "partial" (CREDITS); manual items are given their points directly."""
        return str(self.items.get(item, {}).get("credit", "all"))


def load_config(path: Path = DEFAULT_CONFIG) -> Config:
    try:
        raw = tomllib.loads(Path(path).read_text())
        perf, limits, checks = raw["performance"], raw["limits"], raw.get("checks", {})
        config = Config(
            items=raw["items"],
            full_at=float(perf["full_at"]),
            zero_at=float(perf["zero_at"]),
            net_full_at=float(perf.get("net_full_at", perf["full_at"])),
            repeats=int(perf["repeats"]),
            warmup=int(perf["warmup"]),
            seconds_gpu=float(limits["seconds_gpu"]),
            seconds_simulator=float(limits["seconds_simulator"]),
            findings_fail=bool(checks.get("simulator_findings_fail", True)),
            static_scan_fails=bool(raw.get("anticheat", {}).get("static_scan_fails", True)),
            policy=str(raw.get("anticheat", {}).get("policy", "enforce")),
            sanitizer_tools=tuple(checks.get("gpu_sanitizer", [])),
            sanitizer_findings_fail=bool(checks.get("gpu_sanitizer_findings_fail", False)),
            sanitizer_path=str(checks.get("gpu_sanitizer_path", "")),
            seconds_sanitizer=float(limits.get("seconds_sanitizer", 900)),
            bonus=_flag(raw.get("bonus", {}).get("enabled", False), "[bonus] enabled"),
            seconds_mpi=float(raw.get("mpi", {}).get("seconds", 90)),
            mpiexec=str(raw.get("mpi", {}).get("mpiexec", "")),
            manual=raw.get("manual", {}),
        )
        sandbox_settings = sandbox.Settings.from_config(raw.get("sandbox", {}))
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{path}: {type(err).__name__}: {err}") from None
    if config.policy not in ("enforce", "strict", "report"):
        raise ConfigError(f'{path}: [anticheat] policy: expected "enforce", "strict" or "report"')
    if not 0 < config.full_at < config.zero_at or not 0 < config.net_full_at < config.zero_at:
        raise ConfigError(f"{path}: need 0 < full_at, net_full_at < zero_at")
    unknown = [t for t in config.sanitizer_tools if t not in sanitizer.TOOLS]
    if unknown:
        raise ConfigError(f"{path}: [checks] gpu_sanitizer: unknown tool(s) {unknown}; "
                          f"choose from {', '.join(sanitizer.TOOLS)}")
    if config.repeats < 1 or config.warmup < 0:
        raise ConfigError(f"{path}: need repeats >= 1 and warmup >= 0")
    _check_items(path, config)
    # Workers started by this process run under the sandbox settings of the config loaded.
    sandbox.use(sandbox_settings)
    return config


def _check_items(path: Path, config: Config) -> None:
    """Points >= 0 everywhere, a known credit rule, and no id both graded and manual."""
    if not isinstance(config.manual, dict):
        raise ConfigError(f"{path}: [manual] must be a table of items")
    for table, items in (("items", config.items), ("manual", config.manual)):
        for item, spec in items.items():
            try:
                ok = isinstance(spec, dict) and float(spec.get("points", -1)) >= 0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ConfigError(f"{path}: [{table}.\"{item}\"] needs points >= 0")
            credit = spec.get("credit", "all")
            if table == "manual" and "credit" in spec:
                raise ConfigError(f"{path}: [manual.\"{item}\"] credit: a manual item's "
                                  "points come from the instructor's CSV; remove credit")
            if credit not in CREDITS:
                raise ConfigError(f'{path}: [items."{item}"] credit = {credit!r}: expected '
                                  + " or ".join(f'"{c}"' for c in CREDITS))
    both = sorted(set(config.items) & set(config.manual))
    if both:
        raise ConfigError(f"{path}: {', '.join(both)}: both an [items] and a [manual] item")


def partial_points(points: float, passed: int, total: int) -> float:
    """points x passed / total, rounded to PARTIAL_DECIMALS decimals (0 for no cases)."""
    if total <= 0 or passed <= 0:
        return 0.0
    return round(points * min(passed, total) / total, PARTIAL_DECIMALS)


def _flag(value: object, name: str) -> bool:
    """A boolean setting; a string such as "false" would otherwise read as true."""
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected true or false, got {value!r}")
    return value


def speed_share(ratio: float, full_at: float, zero_at: float) -> float:
    """Share of the performance points for a time ratio T_submission / T_reference."""
    if not math.isfinite(ratio) or ratio <= 0:
        return 0.0
    if ratio <= full_at:
        return 1.0
    if ratio >= zero_at:
        return 0.0
    return (1.0 / ratio - 1.0 / zero_at) / (1.0 / full_at - 1.0 / zero_at)


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))
