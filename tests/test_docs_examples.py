"""Every Python block of README.md and docs/*.md runs as printed.

The conventions, the way doctest treats the examples of one docstring:

- The ```` ```python ```` blocks of one Markdown file run in order, in one namespace, with a fresh
  temporary directory as the working directory (and on ``sys.path``): a block may use what an
  earlier block of the same file defined, never what another file defined. Such a block says so
  just before it ("Continuing the example above (`app`):"; :mod:`test_docs_blocks_alone`).
  Blocks that are not Python to run use another fence language (``sh``, ``console``, ``yaml``,
  ``nginx``, ...).
- A block whose first line is a comment naming a file (``# app.py``, ``# providers.yaml``) is
  that file: every named block of the file is written to the temporary directory before any
  block runs. A named Python module is imported as that module (as ``flask --app app`` would),
  and its names join the namespace.
- A Python block that defines a top-level ``test_`` function is a pytest test: it is written to
  the temporary directory (under its name, or ``test_<doc>_<n>.py``) and run by pytest in a
  subprocess, which must pass with every test passed.
- The environment variables that the documents tell the reader to set (``export NAME=...`` in a
  ``sh`` block of any of them) are set, with the printed value or a placeholder where the value
  is a command.
- A block that truly cannot run (it needs a provider account or the internet) is preceded by
  ``<!-- skip-example: <reason> -->``. Every such marker must be listed in ``EXPECTED_SKIPS``
  below, and the run reports their count: none is silent.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

# (document, first line of the block) -> reason; empty while every block runs
EXPECTED_SKIPS: dict[tuple[str, str], str] = {}

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
SKIP_MARKER = re.compile(r"^<!--\s*skip-example:\s*(?P<reason>.+?)\s*-->$")
FILE_NAME = re.compile(r"^#\s*(?P<name>[\w.-]+\.(?:py|ya?ml|json|toml|cfg|txt|env))\s*$")
EXPORT = re.compile(r"^\s*export\s+(?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>\S.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown document."""

    document: str
    line: int
    language: str
    source: str
    skip_reason: str | None

    @property
    def file_name(self) -> str | None:
        first = self.source.split("\n", 1)[0]
        match = FILE_NAME.match(first)
        return match["name"] if match else None

    @property
    def is_pytest_module(self) -> bool:
        tree = ast.parse(self.source)
        return any(
            isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
            for node in tree.body
        )


def document_name(path: Path) -> str:
    """The document's path relative to the repository, as messages and skip lists name it."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def read_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with the skip marker just before each."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            body.append(lines[index][indent:] if lines[index][:indent].isspace() else lines[index])
            index += 1
        index += 1
        previous = next((line for line in reversed(lines[:start]) if line.strip()), "")
        marker = SKIP_MARKER.match(previous.strip())
        blocks.append(
            Block(
                document=document_name(path),
                line=start + 1,
                language=opening["info"].strip().split(" ")[0].lower(),
                source="\n".join(body) + "\n",
                skip_reason=marker["reason"] if marker else None,
            )
        )
    return blocks


def documented_environment() -> dict[str, str]:
    """The variables the documents tell the reader to export, with a runnable value each."""
    environment: dict[str, str] = {}
    for document in DOCUMENTS:
        for block in read_blocks(document):
            if block.language not in {"sh", "bash", "console", "shell"}:
                continue
            for line in block.source.splitlines():
                match = EXPORT.match(line)
                if match is None:
                    continue
                value = match["value"].strip().strip("'\"")
                plain = not any(character in value for character in "$`<>()")
                environment[match["name"]] = value if plain else f"example-{match['name'].lower()}"
    return environment


@pytest.fixture
def example_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh working directory on sys.path, with the documented environment; modules the
    examples import are forgotten afterwards."""
    for name, value in documented_environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    modules_before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - modules_before:
        module_file = getattr(sys.modules[name], "__file__", None) or ""
        if module_file.startswith(str(tmp_path)):
            del sys.modules[name]


def run_document(path: Path, directory: Path) -> tuple[int, int]:
    """Run the Python blocks of one document; returns (blocks run, pytest modules run)."""
    blocks = read_blocks(path)
    for block in blocks:
        if block.file_name is not None:
            (directory / block.file_name).write_text(block.source, encoding="utf-8")
    stem = re.sub(r"\W", "_", path.stem.lower())
    namespace: dict[str, Any] = {"__name__": f"docs_example_{stem}"}
    ran = 0
    test_files: list[str] = []
    for number, block in enumerate(blocks, start=1):
        if block.language != "python" or block.skip_reason is not None:
            continue
        where = f"{block.document}, line {block.line}"
        if block.is_pytest_module:
            name = block.file_name or f"test_{stem}_{number}.py"
            assert name.startswith("test_"), f"{where}: a pytest block's file must be test_*.py"
            (directory / name).write_text(block.source, encoding="utf-8")
            test_files.append(name)
        elif block.file_name is not None and block.file_name.endswith(".py"):
            module = importlib.import_module(block.file_name.removesuffix(".py"))
            namespace.update(
                {key: value for key, value in vars(module).items() if not key.startswith("__")}
            )
        else:
            source = "\n" * block.line + block.source  # tracebacks name the document's lines
            exec(compile(source, block.document, "exec"), namespace)  # noqa: S102
        ran += 1
    if test_files:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-W",
                "error",
                *test_files,
            ],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(directory)},
        )
        assert result.returncode == 0, f"{path.name}: pytest blocks failed:\n{result.stdout}"
        assert re.search(r"\b\d+ passed", result.stdout), result.stdout
        assert not re.search(r"\b\d+ (skipped|xfailed|deselected)", result.stdout), result.stdout
    return ran, len(test_files)


@pytest.mark.parametrize("path", DOCUMENTS, ids=[path.name for path in DOCUMENTS])
def test_every_python_block_of_the_document_runs(path: Path, example_dir: Path) -> None:
    ran, _ = run_document(path, example_dir)
    python_blocks = [block for block in read_blocks(path) if block.language == "python"]
    assert ran == len([block for block in python_blocks if block.skip_reason is None])


def test_skipped_examples_are_the_listed_ones_and_are_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    skipped = {
        (block.document, block.source.split("\n", 1)[0]): block.skip_reason
        for path in DOCUMENTS
        for block in read_blocks(path)
        if block.skip_reason is not None
    }
    total = sum(
        1 for path in DOCUMENTS for block in read_blocks(path) if block.language == "python"
    )
    with capsys.disabled():
        print(f"\ndocs examples: {total} Python blocks, {len(skipped)} marked skip-example")
        for (document, first_line), reason in sorted(skipped.items()):
            print(f"  skipped: {document}: {first_line!r}: {reason}")
    assert skipped == EXPECTED_SKIPS
    assert total >= 10


def test_the_block_reader_sees_fences_languages_names_and_markers(tmp_path: Path) -> None:
    document = tmp_path / "page.md"
    document.write_text(
        "Text\n\n```python\n# app.py\nx = 1\n```\n\n"
        "<!-- skip-example: needs a provider account -->\n\n"
        "```python\ny = 2\n```\n\n"
        "1. A list item:\n\n   ```sh\n   export FOO=bar\n   ```\n"
        "~~~yaml\n# providers.yaml\na: b\n~~~\n",
        encoding="utf-8",
    )
    blocks = read_blocks(document)
    assert [(block.language, block.file_name, block.skip_reason) for block in blocks] == [
        ("python", "app.py", None),
        ("python", None, "needs a provider account"),
        ("sh", None, None),
        ("yaml", "providers.yaml", None),
    ]
    assert blocks[2].source == "export FOO=bar\n"
    assert not blocks[0].is_pytest_module


def readme_block(first_line: str) -> Block:
    """The README's block whose first line is ``first_line``."""
    matches = [
        block
        for block in read_blocks(ROOT / "README.md")
        if block.source.split("\n", 1)[0].strip() == first_line
    ]
    assert len(matches) == 1, f"README.md has {len(matches)} blocks starting {first_line!r}"
    return matches[0]


def readme_environment() -> dict[str, str]:
    """The variables the README's Quick start tells the reader to export."""
    quick_start = readme_block("pip install -e .")
    environment: dict[str, str] = {}
    for line in quick_start.source.splitlines():
        match = EXPORT.match(line)
        if match is not None:
            environment[match["name"]] = f"example-{match['name'].lower()}"
    return environment


def load_module(path: Path, name: str) -> Any:
    """Import ``path`` as module ``name``, as ``flask --app`` would."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.fixture
def quick_start_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The README's Quick start done literally: ``flask social init github >> providers.yaml``,
    ``app.py`` as printed, and only the README's variables in the environment."""
    for name in list(os.environ):
        if name.startswith(("FLASK_", "GITHUB_")) or name in {"SECRET_KEY", "TRUSTED_HOSTS"}:
            monkeypatch.delenv(name)
    for name, value in readme_environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    init = subprocess.run(
        [sys.executable, "-m", "flask", "social", "init", "github"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    (tmp_path / "providers.yaml").write_text(init.stdout, encoding="utf-8")
    (tmp_path / "app.py").write_text(readme_block("# app.py").source, encoding="utf-8")
    return tmp_path


def test_the_readme_tells_the_reader_to_set_the_quick_start_variables() -> None:
    assert set(readme_environment()) == {
        "FLASK_SECRET_KEY",
        "GITHUB_CLIENT_ID",
        "GITHUB_CLIENT_SECRET",
    }


@pytest.mark.parametrize("origin", ["http://127.0.0.1:5000", "http://localhost:5000"])
def test_the_quick_start_app_signs_in_on_the_local_addresses(
    quick_start_dir: Path, origin: str
) -> None:
    app = load_module(quick_start_dir / "app.py", "app").app
    client = app.test_client()
    page = client.get("/", base_url=origin)
    assert page.status_code == 200
    assert b'href="/authenticate/github?next=/"' in page.data
    start = client.get("/authenticate/github?next=/", base_url=origin)
    assert start.status_code == 302
    location = start.headers["Location"]
    assert location.startswith("https://github.com/login/oauth/authorize?")
    query = dict(parse_qsl(urlsplit(location).query))
    assert query["redirect_uri"] == f"{origin}/authenticate/github"
    assert query["client_id"] == "example-github_client_id"
    assert client.get("/", base_url="http://evil.example:5000").status_code == 400


def test_the_quick_start_app_takes_its_production_hosts_from_the_environment(
    quick_start_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLASK_TRUSTED_HOSTS", '["app.example.com"]')
    app = load_module(quick_start_dir / "app.py", "app").app
    client = app.test_client()
    assert client.get("/", base_url="https://app.example.com").status_code == 200
    assert client.get("/", base_url="http://localhost:5000").status_code == 400


def test_flask_social_check_passes_on_the_quick_start_and_names_a_missing_secret_key(
    quick_start_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = [sys.executable, "-m", "flask", "--app", "app", "social", "check"]
    passed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    monkeypatch.delenv("FLASK_SECRET_KEY")
    failed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert "SECRET_KEY is not set" in output
    assert "Traceback" not in output


def ci_commands() -> list[str]:
    """The commands of .ci/run, without the shell's own setup lines."""
    setup = ("#", "set ", "cd ", "export ")
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith(setup)]


def test_ci_runs_exactly_the_readme_install_line_and_test_command() -> None:
    readme = readme_block(
        "apt-get update && apt-get install -y --no-install-recommends"
        " chromium nginx-light postgresql build-essential"
    )
    assert ci_commands() == readme.source.splitlines()
    assert ci_commands()[-1] == "pip install tox && tox"
    assert readme.source in (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")


LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")
INCLUDE = re.compile(r"^```\{include\}\s+(?P<path>\S+)", re.MULTILINE)


def heading_anchors(path: Path) -> set[str]:
    """The anchors MyST (and GitHub) give the headings of ``path``, following an include."""
    text = path.read_text(encoding="utf-8")
    included = INCLUDE.match(text)
    if included is not None:
        return heading_anchors((path.parent / included["path"]).resolve())
    anchors = set()
    for line in text.splitlines():
        if line.startswith("#") and not line.startswith("#!"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_every_relative_link_of_the_docs_reaches_a_file_and_heading() -> None:
    problems = []
    checked = 0
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
        for match in LINK.finditer(text):
            target = match["target"]
            if re.match(r"[a-z]+:", target):
                continue
            path_part, _, anchor = target.partition("#")
            path = (document.parent / path_part).resolve() if path_part else document
            where = f"{document_name(document)} -> {target}"
            checked += 1
            if not path.is_file():
                problems.append(f"{where}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in heading_anchors(path):
                problems.append(f"{where}: no such heading")
    assert problems == []
    assert checked >= 15


def test_the_quick_start_without_its_secret_key_answers_a_clear_503_never_a_500(
    quick_start_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("FLASK_SECRET_KEY")
    app = load_module(quick_start_dir / "app.py", "app").app
    client = app.test_client()
    with caplog.at_level("ERROR", logger="flask_social_oauth2"):
        start = client.get("/authenticate/github", base_url="http://127.0.0.1:5000")
    assert start.status_code == 503
    assert b"which the server&#39;s log names" in start.data
    assert "key 'SECRET_KEY': is not set" in caplog.text
    assert "Set-Cookie" not in start.headers
