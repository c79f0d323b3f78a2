"""Each Python block of README.md and docs/*.md copied alone, as a reader copies one block into
a fresh interpreter: it runs, or the text just before it says that it continues an earlier
block and names what it takes from there.

:mod:`test_docs_examples` runs a page's blocks in order in one namespace, where a block may use
what an earlier one defined; here each block runs by itself, in a namespace and a working
directory of its own. A block that reads a name an earlier block of its page binds (``app``,
``store``) relies on that block: the paragraph just before it says "Continuing ..." and names
each such name in backticks, e.g. "Continuing the example above (`app`, `store`):". Imports are
cheap, so a block makes its own rather than borrowing them. Blocks that are files (``# app.py``)
or pytest modules are whole by themselves already.
"""

from __future__ import annotations

import builtins
import re
import symtable
from pathlib import Path

import pytest
from test_docs_examples import DOCUMENTS, Block, example_dir, read_blocks

__all__ = ["example_dir"]  # the fixture this module uses from test_docs_examples

CONTINUES = re.compile(r"\bcontinu(?:ing|es)\b", re.IGNORECASE)
BUILTIN_NAMES = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__"}
PAGES = [path for path in DOCUMENTS if any(b.language == "python" for b in read_blocks(path))]


def names_bound(source: str) -> set[str]:
    """The names a block binds at its top level: assigned, imported, defined."""
    table = symtable.symtable(source, "<block>", "exec")
    return {
        symbol.get_name()
        for symbol in table.get_symbols()
        if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()
    }


def names_read(source: str) -> set[str]:
    """The names a block reads from its module's namespace: at its top level, and in its
    functions, classes and comprehensions the names they do not bind themselves."""
    table = symtable.symtable(source, "<block>", "exec")
    read = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_referenced()}
    nested = list(table.get_children())
    while nested:
        scope = nested.pop()
        nested += scope.get_children()
        read |= {s.get_name() for s in scope.get_symbols() if s.is_global() and s.is_referenced()}
    return read


def text_before(path: Path, block: Block) -> str:
    """The paragraph just before the block's opening fence (after a skip marker, if any): a
    heading or another block right before it is no paragraph."""
    lines = path.read_text(encoding="utf-8").splitlines()[: block.line - 1]
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("<!--")):
        lines.pop()
    paragraph: list[str] = []
    while lines and lines[-1].strip() and not lines[-1].lstrip().startswith(("#", "```", "~~~")):
        paragraph.insert(0, lines.pop())
    return " ".join(line.strip() for line in paragraph)


def run_alone(block: Block, directory: Path, files: list[Block]) -> Exception | None:
    """Run ``block`` by itself, in a fresh namespace with ``directory`` (holding the page's
    named files) as its working directory and on ``sys.path``, as ``python block.py`` would;
    returns what it raised."""
    directory.mkdir()
    for named in files:
        (directory / str(named.file_name)).write_text(named.source, encoding="utf-8")
    source = "\n" * block.line + block.source  # tracebacks name the document's lines
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(directory)
        patch.syspath_prepend(str(directory))
        try:
            exec(compile(source, block.document, "exec"), {"__name__": "docs_block_alone"})  # noqa: S102
        except Exception as error:  # what it raised is the finding
            return error
    return None


@pytest.mark.parametrize("path", PAGES, ids=[path.name for path in PAGES])
def test_a_block_copied_alone_runs_or_says_what_it_continues(path: Path, example_dir: Path) -> None:
    blocks = read_blocks(path)
    files = [block for block in blocks if block.file_name is not None]
    earlier: set[str] = set()  # what the page's blocks so far have bound
    problems: list[str] = []
    for block in blocks:
        if block.language != "python" or block.skip_reason is not None or block.is_pytest_module:
            continue
        bound = names_bound(block.source)
        if block.file_name is not None:  # a module, imported whole: its names join the page's
            earlier |= bound
            continue
        where = f"{block.document}, line {block.line}"
        relied = sorted((names_read(block.source) - bound - BUILTIN_NAMES) & earlier)
        raised = run_alone(block, example_dir / f"alone-{block.line}", files)
        if raised is not None and not (isinstance(raised, NameError) and raised.name in relied):
            problems.append(f"{where}: copied alone it raises {raised!r}")
        said = text_before(path, block)
        named = [name for name in relied if f"`{name}`" in said]
        if relied and (not CONTINUES.search(said) or named != relied):
            problems.append(
                f"{where}: uses {', '.join(relied)} from an earlier block; say so just before"
                f" it, e.g. 'Continuing the example above (`{'`, `'.join(relied)}`):'"
            )
        if not relied and CONTINUES.search(said):
            problems.append(f"{where}: says it continues, but it runs alone")
        earlier |= bound
    assert problems == [], "\n".join(problems)


def test_the_analysis_finds_what_a_block_takes_from_an_earlier_one(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\n\n```python\nimport time\napp = object()\n```\n\n"
        "Continuing the example above (`app`):\n\n"
        "```python\ndef later():\n    return app, time, len\n\n"
        "now = [app for _ in range(1)]\n```\n",
        encoding="utf-8",
    )
    first, second = read_blocks(page)
    assert names_bound(first.source) == {"time", "app"}
    assert names_read(second.source) - names_bound(second.source) - BUILTIN_NAMES == {
        "app",
        "time",
    }
    assert text_before(page, second) == "Continuing the example above (`app`):"
    assert text_before(page, first) == "Intro."
    raised = run_alone(second, tmp_path / "alone", [])
    assert isinstance(raised, NameError)
    assert raised.name == "app"
