"""Every ``flask social`` command that README.md and the docs show runs and prints what they show.

The conventions (beside those of ``test_docs_examples.py``, whose block reader this reuses):

- A ``console`` block is a shell session: each ``$ command`` line is followed by what the
  command prints, its standard output and error as a terminal shows them. A line ``...`` stands
  for any number of lines, and ``...`` inside a line for any text.
- A ``flask ... social ...`` line of an ``sh`` block runs too; when it appends to a file
  (``flask social init github >> providers.yaml``), what it writes must be the document's block
  of that name (without the ``# providers.yaml`` line that names it).
- The commands of one document run in order, as one bash session, in a fresh directory holding
  the document's named blocks (``# app.py``, ``# providers.yaml``; not the files that a command
  writes), with the ``export`` lines of its ``sh`` blocks and ``$ export`` lines of its sessions
  run where they stand, and none of the caller's ``FLASK_*`` variables. ``flask`` and ``python``
  are those of the test run; the package is the one the test run imports.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_docs_examples import DOCUMENTS, ROOT, Block, document_name, read_blocks

import flask_social_oauth2

#: ``flask [--app NAME] social ...``: the commands this test runs.
SOCIAL_COMMAND = re.compile(r"^flask\s+(?:--app\s+\S+\s+)?social\b")
APPENDS_TO = re.compile(r">>?\s*(?P<name>[\w.-]+)\s*(?:#.*)?$")
MARKER = "@@@ documented command {} @@@"


@dataclass(frozen=True)
class Step:
    """One line of a document's session: a command to compare, or a setup line to run."""

    document: str
    line: int
    command: str
    expected: str | None  # what it prints, as documented; None for a setup line
    writes: str | None = None  # the named block a command's output is appended to


def documented_steps(path: Path) -> list[Step]:
    """The commands and ``export`` lines of ``path``'s ``sh`` and ``console`` blocks, in order."""
    blocks = read_blocks(path)
    steps: list[Step] = []
    for block in blocks:
        lines = block.source.rstrip("\n").split("\n")
        if block.language == "sh":
            for offset, text in enumerate(lines, start=1):
                line = block.line + offset
                if text.startswith("export "):
                    steps.append(Step(block.document, line, text, None))
                elif SOCIAL_COMMAND.match(text):
                    target = APPENDS_TO.search(text)
                    name = target["name"] if target else None
                    expected = named_block(blocks, name) if name else ""
                    steps.append(Step(block.document, line, text, expected, name))
        elif block.language == "console":
            steps.extend(console_steps(block, lines))
    return steps


def console_steps(block: Block, lines: list[str]) -> list[Step]:
    """The ``$ command`` lines of a console block, each with the lines up to the next one."""
    starts = [index for index, text in enumerate(lines) if text.startswith("$ ")]
    assert starts[:1] == [0], f"{block.document}, line {block.line}: not a session"
    steps = []
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(lines)
        command = lines[start][2:]
        printed = "\n".join(lines[start + 1 : end]).rstrip("\n")
        where = f"{block.document}, line {block.line + 1 + start}"
        if command.startswith("export "):
            assert not printed, f"{where}: an export prints nothing"
            steps.append(Step(block.document, block.line + 1 + start, command, None))
            continue
        assert SOCIAL_COMMAND.match(command), f"{where}: not a flask social command: {command}"
        steps.append(Step(block.document, block.line + 1 + start, command, printed))
    return steps


def named_block(blocks: list[Block], name: str) -> str:
    """The text of the block named ``name``, without the line that names it."""
    (found,) = [block for block in blocks if block.file_name == name]
    return found.source.split("\n", 1)[1].rstrip("\n")


def printed_pattern(documented: str) -> re.Pattern[str]:
    """A pattern for the output ``documented`` shows, ``...`` standing for what is left out."""
    parts = []
    for line in documented.split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(map(re.escape, line.split("..."))) + r"\n")
    return re.compile("".join(parts))


def run_session(steps: list[Step], directory: Path) -> list[str]:
    """Run ``steps`` as one bash session in ``directory``; what each compared step printed."""
    script = ["exec 2>&1"]
    for index, step in enumerate(steps):
        if step.expected is not None:
            script.append(f"printf '\\n%s\\n' '{MARKER.format(index)}'")
        script.append(step.command)
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FLASK_", "GITHUB_", "GOOGLE_"))
    }
    environment.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}",
        PYTHONPATH=str(Path(flask_social_oauth2.__file__).parent.parent),
        PYTHONUNBUFFERED="1",
        COLUMNS="200",
    )
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert "Traceback" not in done.stdout, done.stdout
    outputs = []
    for index, step in enumerate(steps):
        if step.expected is None:
            continue
        marker = MARKER.format(index)
        assert marker in done.stdout, f"{step.document}, line {step.line}: did not run"
        after = done.stdout.split(f"{marker}\n", 1)[1]
        printed = re.split(r"\n@@@ documented command \d+ @@@\n", "\n" + after, maxsplit=1)[0]
        outputs.append(printed.strip("\n"))
    return outputs


def documents_with_commands() -> list[Path]:
    return [
        path for path in DOCUMENTS if any(s.expected is not None for s in documented_steps(path))
    ]


def test_the_readme_and_the_configuration_page_show_commands() -> None:
    names = {document_name(path) for path in documents_with_commands()}
    assert {"README.md", "docs/configuration.md"} <= names
    for name, count in (("README.md", 3), ("docs/configuration.md", 4)):
        steps = documented_steps(ROOT / name)
        assert len([step for step in steps if step.expected is not None]) >= count, name


@pytest.mark.parametrize("path", documents_with_commands(), ids=document_name)
def test_every_documented_command_prints_what_the_document_shows(
    path: Path, tmp_path: Path
) -> None:
    steps = documented_steps(path)
    writes = {step.writes for step in steps}
    for block in read_blocks(path):
        if block.file_name is not None and block.file_name not in writes:
            (tmp_path / block.file_name).write_text(block.source, encoding="utf-8")
    compared = [step for step in steps if step.expected is not None]
    for step, printed in zip(compared, run_session(steps, tmp_path), strict=True):
        where = f"{step.document}, line {step.line}: {step.command}"
        assert step.expected is not None
        if step.writes is not None:
            assert printed == "", where
            printed = (tmp_path / step.writes).read_text(encoding="utf-8").rstrip("\n")
        assert printed_pattern(step.expected).fullmatch(printed + "\n"), (
            f"{where}\n--- documented:\n{step.expected}\n--- printed:\n{printed}"
        )


def test_the_output_pattern_takes_ellipses_for_lines_and_text() -> None:
    pattern = printed_pattern("github\n  class: x\n...\n  redirect URL: http://...:5000/a\n...")
    assert pattern.fullmatch("github\n  class: x\n  token: t\n  redirect URL: http://h:5000/a\n")
    assert pattern.fullmatch("github\n  class: x\n  redirect URL: http://h:5000/a\n  more\n")
    assert not pattern.fullmatch("github\n  class: y\n  redirect URL: http://h:5000/a\n")
    assert not pattern.fullmatch("github\n  class: x\n  redirect URL: http://h:5001/a\n")
