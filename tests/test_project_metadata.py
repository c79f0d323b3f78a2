"""pyproject.toml declares what the package imports, tests-min pins exactly the declared floors,
and every extra that a document or a message names exists; tox, pre-commit and CHANGES.md keep
the Pallets habits."""

from __future__ import annotations

import ast
import configparser
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "flask_social_oauth2"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
DEPENDENCIES = [Requirement(line) for line in PROJECT["dependencies"]]
EXTRAS: dict[str, list[Requirement]] = {
    name: [Requirement(line) for line in lines]
    for name, lines in PROJECT["optional-dependencies"].items()
}
# Subpackages that need an extra, and the extra; the rest of the package needs only the
# dependencies. The pytest plugin's modules run only inside pytest.
NEEDS_EXTRA = {"local_idp": "idp", "tokens/sql.py": "sql", "tokens/sql_sessions.py": "sql"}
RUN_BY_PYTEST = {"pytest_plugin.py", "testing.py"}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_top_level_modules(path: Path) -> set[str]:
    """Top-level names of the absolute imports in ``path``, anywhere in the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"flask_social_oauth2"}


def distributions_of(modules: set[str]) -> set[str]:
    mapping = importlib.metadata.packages_distributions()
    return {normalize(dist) for module in modules for dist in mapping.get(module, [module])}


def test_the_package_imports_only_what_it_declares() -> None:
    declared = {normalize(requirement.name) for requirement in DEPENDENCIES}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        allowed = set(declared)
        where = next(
            (w for w in (relative.as_posix(), relative.parts[0]) if w in NEEDS_EXTRA), None
        )
        if where is not None:
            extra = NEEDS_EXTRA[where]
            allowed |= {normalize(requirement.name) for requirement in EXTRAS[extra]}
        if relative.name in RUN_BY_PYTEST:
            allowed.add("pytest")
        undeclared = distributions_of(imported_top_level_modules(path)) - allowed
        assert not undeclared, f"{relative} imports undeclared {sorted(undeclared)}"


def test_every_declared_dependency_is_imported_or_kept_on_purpose() -> None:
    imported: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        imported |= distributions_of(imported_top_level_modules(path))
    # requests-oauthlib: the token-storage work uses its OAuth2Session (DESIGN.md)
    kept_on_purpose = {"requests-oauthlib"}
    unused = {normalize(requirement.name) for requirement in DEPENDENCIES} - imported
    assert unused <= kept_on_purpose


def minimum_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "tests" / "constraints-min.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[normalize(name)] = version
    return pins


def floor(requirement: Requirement) -> str:
    floors = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    assert len(floors) == 1, f"{requirement} has no single >= floor"
    return floors[0]


def test_tests_min_pins_the_floor_of_every_dependency_and_test_requirement() -> None:
    expected: dict[str, str] = {}
    for requirement in [*DEPENDENCIES, *EXTRAS["test"]]:
        expected[normalize(requirement.name)] = floor(requirement)
    pins = minimum_pins()
    assert set(pins) == set(expected)
    for name, version in expected.items():
        assert Requirement(f"x=={pins[name]}").specifier == Requirement(f"x=={version}").specifier


def test_every_extra_named_in_docs_and_code_exists() -> None:
    named = re.compile(r"flask-social-oauth2\[([\w,-]+)\]|\"\.\[([\w,-]+)\]\"|'\.\[([\w,-]+)\]'")
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *PACKAGE.rglob("*.py")]
    files += [ROOT / "tox.ini", *(ROOT / "example_app").rglob("*.py"), ROOT / ".ci" / "run"]
    for path in files:
        for match in named.finditer(path.read_text(encoding="utf-8")):
            extras = next(group for group in match.groups() if group)
            for extra in extras.split(","):
                assert extra in EXTRAS, f"{path.relative_to(ROOT)} names the extra [{extra}]"


def test_tox_runs_the_ci_gate_by_default_and_bench_on_demand() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini", encoding="utf-8")
    env_list = [name.strip() for name in tox["tox"]["env_list"].split(",")]
    assert env_list == [
        "py311",
        "tests-min",
        "lint",
        "typing",
        "docs",
        "browser",
        "multiprocess",
    ]
    assert "testenv:bench" in tox
    assert "testenv:soak" in tox
    assert "coverage report" in tox["testenv"]["commands"]
    for name in ("tests-min", "docs"):
        assert f"testenv:{name}" in tox
    # the API reference imports local_idp (the idp extra) and the SQL token store (sql)
    assert {"docs", "idp", "sql"} <= {
        extra.strip() for extra in tox["testenv:docs"]["extras"].split(",")
    }


def test_py311_measures_branch_coverage_with_a_floor() -> None:
    coverage = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "coverage"
    ]
    assert coverage["run"]["branch"] is True
    assert coverage["run"]["source"] == ["flask_social_oauth2"]
    assert coverage["report"]["fail_under"] >= 90


def test_the_benchmark_smoke_run_is_part_of_the_default_suite() -> None:
    source = (ROOT / "tests" / "test_benchmarks.py").read_text(encoding="utf-8")
    assert "pytest.mark." not in source
    assert "pytestmark" not in source
    assert "def test_one_whole_flow_round" in source


def test_pre_commit_runs_ruff_and_the_file_hygiene_hooks() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hooks = {
        repo["repo"].rsplit("/", 1)[-1]: {hook["id"] for hook in repo["hooks"]}
        for repo in config["repos"]
    }
    assert hooks["ruff-pre-commit"] == {"ruff-check", "ruff-format"}
    assert {
        "check-merge-conflict",
        "debug-statements",
        "trailing-whitespace",
        "end-of-file-fixer",
        "check-yaml",
        "check-toml",
    } <= hooks["pre-commit-hooks"]


def test_changes_has_the_pallets_form() -> None:
    """A heading per version, newest first, its date or "Unreleased" under it, then a bullet
    per change."""
    text = (ROOT / "CHANGES.md").read_text(encoding="utf-8")
    assert text.startswith("# Changes\n")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    assert sections
    for section in sections:
        heading, status, *body = [line for line in section.splitlines() if line.strip()]
        assert re.fullmatch(r"Version \d+\.\d+\.\d+", heading), heading
        assert re.fullmatch(r"Unreleased|Released \d{4}-\d{2}-\d{2}", status), status
        assert body[0].startswith("- ")
        assert all(line.startswith(("- ", "  ")) for line in body), heading
    version = PROJECT["version"].split(".dev")[0]
    assert sections[0].startswith(f"Version {version}\n")


def test_changes_speak_to_the_user() -> None:
    """What changed for the user, in their words: issue numbers, instruction counts and CPU
    shares belong in commit messages and benchmarks/RESULTS.md."""
    text = (ROOT / "CHANGES.md").read_text(encoding="utf-8")
    assert not re.search(r"\bissues? \d+", text, flags=re.IGNORECASE)
    assert not re.search(r"\d %|\d%|\binstructions\b|\bbytecodes?\b|\bCPU\b", text)
