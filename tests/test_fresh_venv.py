"""The README's Quick start, its testing snippet and every code block of the docs run as printed
in a fresh virtual environment that holds only what the documents tell the reader to install.

The suite runs in an environment with every extra installed, where a block that needs a test
requirement (Hypothesis, Flask-SQLAlchemy, ...) would run although a reader's ``pip install -e .``
never installs it. Here a new ``python -m venv`` gets, instead of a download (the suite has no
network), links to exactly the installed distributions that ``pip install -e ".[extras]"`` would
pull in: the closure of the declared requirements, read from ``pyproject.toml`` and the installed
metadata. The package itself is on the path as an editable install puts it, with its entry points
(``flask social`` and the pytest plugin). The checks of :mod:`test_docs_examples` then run with
that interpreter; pytest is in the environment only to run them (and it is the reader's own in the
testing snippet).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from test_docs_examples import DOCUMENTS, document_name, read_blocks

ROOT: Final = Path(__file__).resolve().parent.parent
DOCS_TESTS: Final = ROOT / "tests" / "test_docs_examples.py"
PROJECT: Final = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

#: Pages for contributors to this package, whose install lines are not a reader's.
CONTRIBUTORS_PAGES: Final = frozenset({"docs/contributing.md"})
PIP_INSTALL: Final = re.compile(r"\bpip install (?P<arguments>[^#&|;\n]+)")
EXTRAS: Final = re.compile(r"^[\"']?\.\[(?P<extras>[\w,-]+)\][\"']?$")
#: What a reader has installed besides this package and its extras: pytest to run the testing
#: snippet (README.md, docs/testing.md), Flask-SQLAlchemy for docs/tokens.md's "an app that
#: already uses Flask-SQLAlchemy", and Flask-Login for its linking example.
READERS_OWN: Final = ("pytest", "flask-sqlalchemy", "flask-login")


def readers_install_lines() -> list[tuple[str, str]]:
    """(document, arguments) of every ``pip install`` in a shell block of README.md and docs/
    for a reader of the package."""
    return [
        (document_name(path), match["arguments"].strip())
        for path in DOCUMENTS
        if document_name(path) not in CONTRIBUTORS_PAGES
        for block in read_blocks(path)
        if block.language in {"sh", "bash", "console", "shell"}
        for match in PIP_INSTALL.finditer(block.source)
    ]


def extras_of(arguments: str) -> set[str]:
    """The extras that the arguments of one ``pip install`` name (``-e ".[sql,idp]"``)."""
    return {
        extra
        for argument in arguments.split()
        if (found := EXTRAS.match(argument))
        for extra in found["extras"].split(",")
    }


def readers_extras() -> set[str]:
    """The extras those lines install."""
    return {extra for _, arguments in readers_install_lines() for extra in extras_of(arguments)}


def extras_named_first(path: Path) -> frozenset[str]:
    """The extras that the install lines of page ``path`` name before its first Python block:
    what a reader who starts at the top has installed when the examples begin."""
    blocks = read_blocks(path)
    first = min(block.line for block in blocks if block.language == "python")
    return frozenset(
        extra
        for block in blocks
        if block.line < first and block.language in {"sh", "bash", "console", "shell"}
        for match in PIP_INSTALL.finditer(block.source)
        for extra in extras_of(match["arguments"])
    )


def pages_by_extras() -> dict[frozenset[str], list[Path]]:
    """The pages with Python blocks, grouped by the extras they name before the first."""
    groups: dict[frozenset[str], list[Path]] = {}
    for path in DOCUMENTS:
        if any(block.language == "python" for block in read_blocks(path)):
            groups.setdefault(extras_named_first(path), []).append(path)
    return groups


def requirement_closure(requirements: Iterable[Requirement]) -> set[str]:
    """The distributions that installing ``requirements`` installs, as found installed here."""
    found: set[str] = set()
    pending = [(requirement, "") for requirement in requirements]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        extras = sorted(requirement.extras)
        if name in found and not extras:
            continue
        found.add(name)
        distribution = importlib.metadata.distribution(name)
        for line in distribution.requires or []:
            nested = Requirement(line)
            pending += [(nested, wanted) for wanted in ["", *extras]]
    return found


def project_requirements(extras: Iterable[str]) -> list[Requirement]:
    """What ``pip install -e ".[extras]"`` asks for."""
    lines = list(PROJECT["dependencies"])
    for extra in extras:
        lines += PROJECT["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


def top_level_entries(name: str) -> set[Path]:
    """The files and directories of distribution ``name`` directly in its site-packages."""
    distribution = importlib.metadata.distribution(name)
    files = distribution.files
    assert files is not None, f"{name} was installed without a file list (RECORD)"
    entries = set()
    for file in files:
        first = file.parts[0]
        if first in ("..", "__pycache__") or first.endswith(".pth"):
            continue  # scripts, byte code of a top-level module, another project's path hooks
        entries.add(Path(str(distribution.locate_file(first))))
    return entries


def entry_points_text() -> str:
    """The package's entry points, as an install writes them."""
    sections = [
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in PROJECT["entry-points"].items()
    ]
    return "\n".join(sections)


def fresh_venv(where: Path, extras: Iterable[str], own: Iterable[str]) -> Path:
    """A new virtual environment at ``where`` with this package installed (editable) with
    ``extras``, and the reader's ``own`` packages; returns its ``python``."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120
    )
    python = where / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
    )
    wanted = [*project_requirements(extras), *(Requirement(name) for name in own)]
    for name in sorted(requirement_closure(wanted)):
        for entry in top_level_entries(name):
            link = site / entry.name
            if not link.exists():
                link.symlink_to(entry, target_is_directory=entry.is_dir())
    # What `pip install -e .` leaves: the checkout on the path, metadata with entry points.
    (site / "flask_social_oauth2.pth").write_text(f"{ROOT}\n", encoding="utf-8")
    info = site / f"flask_social_oauth2-{PROJECT['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {PROJECT['name']}\nVersion: {PROJECT['version']}\n",
        encoding="utf-8",
    )
    (info / "entry_points.txt").write_text(entry_points_text(), encoding="utf-8")
    return python


def run_checks(python: Path, cwd: Path, *selection: str) -> subprocess.CompletedProcess[str]:
    """Run the tests of test_docs_examples.py that ``selection`` names (``-k`` and an expression,
    or test ids) with ``python``, without this suite's conftest (it needs the test extra) and
    with nothing of this environment."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "PYTEST", "VIRTUAL_ENV", "FLASK_", "COV_"))
    }
    environment["PYTHONNOUSERSITE"] = "1"
    return subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--noconftest",
            "--rootdir",
            str(ROOT),
            *selection,
        ],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def outcome(result: subprocess.CompletedProcess[str]) -> dict[str, int]:
    counts = re.findall(
        r"(\d+) (passed|failed|error|errors|skipped|xfailed|deselected)", result.stdout
    )
    return {word: int(number) for number, word in counts}


def importable(python: Path, modules: Iterable[str]) -> dict[str, bool]:
    code = (
        "import importlib.util, sys\n"
        "for name in sys.argv[1:]:\n"
        "    print(name, importlib.util.find_spec(name) is not None)\n"
    )
    result = subprocess.run(
        [str(python), "-c", code, *modules],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={"PYTHONNOUSERSITE": "1", "PATH": os.environ.get("PATH", "")},
    )
    return {
        name: found == "True"
        for name, found in (line.split() for line in result.stdout.splitlines())
    }


@pytest.fixture
def quick_start_python(tmp_path: Path) -> Path:
    """``pip install -e .``, and pytest to run the checks."""
    return fresh_venv(tmp_path / "venv", extras=(), own=("pytest",))


def test_the_venv_holds_only_what_was_installed(quick_start_python: Path) -> None:
    found = importable(
        quick_start_python,
        ["flask", "requests_oauthlib", "yaml", "joserfc", "cryptography", "pytest",
         "flask_social_oauth2", "authlib", "hypothesis", "sqlalchemy", "flask_sqlalchemy"],
    )  # fmt: skip
    assert found == {
        **dict.fromkeys(["flask", "requests_oauthlib", "yaml", "joserfc", "cryptography"], True),
        **dict.fromkeys(["pytest", "flask_social_oauth2"], True),
        **dict.fromkeys(["authlib", "hypothesis", "sqlalchemy", "flask_sqlalchemy"], False),
    }


def test_the_quick_start_runs_with_only_the_package_installed(
    quick_start_python: Path, tmp_path: Path
) -> None:
    result = run_checks(quick_start_python, tmp_path, "-k", "quick_start", str(DOCS_TESTS))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    counts = outcome(result)
    assert counts.get("passed", 0) >= 6, result.stdout[-2000:]
    assert set(counts) == {"passed", "deselected"}, result.stdout[-2000:]


def test_the_documents_install_from_a_checkout() -> None:
    """The package is on no index yet: every install line a reader sees is ``pip install -e``
    of the checkout (or a tool such as tox), and names only extras that exist."""
    lines = readers_install_lines()
    assert len(lines) >= 6, lines
    for document, arguments in lines:
        assert "flask-social-oauth2" not in arguments.replace("_", "-"), (document, arguments)
        if arguments.split()[0] == "-e":
            assert EXTRAS.match(arguments.split()[1]) or arguments.split()[1] == ".", arguments
    assert readers_extras() <= set(PROJECT["optional-dependencies"])
    assert {"idp", "sql"} <= readers_extras()


PAGE_GROUPS: Final = pages_by_extras()
EXTRAS_SETS: Final = sorted(PAGE_GROUPS, key=lambda extras: sorted(extras))


@pytest.mark.parametrize(
    "extras",
    EXTRAS_SETS,
    ids=[",".join(sorted(extras)) or "no-extra" for extras in EXTRAS_SETS],
)
def test_each_page_runs_with_only_the_extras_it_names_before_its_first_block(
    extras: frozenset[str], tmp_path: Path
) -> None:
    """A page that needs an extra (``[idp]`` for testing your app, ``[sql]`` for the SQL token
    store, ...) says so before its first Python block: its blocks run in an environment with
    only those extras, and the reader's own pytest, Flask-SQLAlchemy and Flask-Login."""
    pages = PAGE_GROUPS[extras]
    python = fresh_venv(tmp_path / "venv", extras=sorted(extras), own=READERS_OWN)
    test = f"{DOCS_TESTS}::test_every_python_block_of_the_document_runs"
    result = run_checks(python, tmp_path, *(f"{test}[{page.name}]" for page in pages))
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    counts = outcome(result)
    assert counts == {"passed": len(pages)}, result.stdout[-2000:]


def test_the_pages_that_need_an_extra_name_it_before_their_first_block() -> None:
    named = {
        document_name(page): sorted(extras)
        for extras, pages in PAGE_GROUPS.items()
        for page in pages
        if extras
    }
    assert named == {
        "README.md": ["example", "idp"],
        "docs/logout.md": ["idp", "sql"],
        "docs/openid-connect.md": ["idp"],
        "docs/tenants.md": ["idp", "sql"],
        "docs/testing.md": ["idp"],
        "docs/tokens.md": ["idp", "sql"],
    }
