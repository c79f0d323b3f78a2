"""The package's shape: imports flow one way (issue "house").

Every import of a package module counts, at module level, inside functions and under
``if TYPE_CHECKING:``: a cycle through any of them means a lower room reaches up.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import flask_social_oauth2

PACKAGE = Path(flask_social_oauth2.__file__).parent
NAME = "flask_social_oauth2"


def package_modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = [NAME, *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_modules(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The package modules ``module`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target.startswith(NAME) and target != module:
                yield target


def third_party_imports(path: Path) -> Iterator[str]:
    """The absolute imports in ``path``'s source (anywhere in it), by module name."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    graph = {name: set(imported_modules(name, path, modules)) for name, path in modules.items()}
    for name in graph:  # a package re-exporting its own children is not a back edge
        if modules[name].name == "__init__.py":
            graph[name] = {t for t in graph[name] if not t.startswith(name + ".")} | {
                t for t in graph[name] if t.startswith(name + ".") and t != name
            }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, as the list of modules along it, or ``None``."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> list[str] | None:
        if node in visiting:
            return [*visiting[visiting.index(node) :], node]
        if node in done:
            return None
        visiting.append(node)
        for target in sorted(graph.get(node, ())):
            cycle = visit(target)
            if cycle is not None:
                return cycle
        visiting.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle is not None:
            return cycle
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


#: The rooms from the top floor down (DESIGN.md's layout, with the modules it does not name
#: placed where their imports put them). A room imports only rooms on lower floors; rooms of one
#: floor do not import each other. The Flask layer (``web/``) stands under ``providers/`` and
#: ``runtime.py``: the steps know a provider only by the protocol they need and are handed the
#: app's stores, so nothing below calls back up. The protocol core (``oidc/``, ``oauth/``,
#: ``config/``) imports neither Flask nor Werkzeug (see the test below).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("__init__",),
    ("extension",),
    ("cli", "pytest_plugin", "routes"),
    ("testing", "checks", "api", "accounts", "options"),
    ("providers",),
    ("runtime",),
    ("web",),
    ("tokens",),
    ("local_idp", "atproto", "oidc"),
    ("oauth",),
    ("config",),
    ("errors", "signals", "urls", "caches"),
)
#: The folders of the protocol core: no module in them imports Flask or Werkzeug.
FLASK_FREE: Final = ("oauth", "oidc", "atproto", "config")
#: At most this many modules at the top of the package: the rest live in folders that say
#: which layer they belong to.
MAX_TOP_LEVEL_MODULES: Final = 15


def room(module: str) -> str:
    """The top-level module or subpackage of the package that ``module`` is in."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_room_imports_only_rooms_on_lower_floors() -> None:
    floor = {name: level for level, names in enumerate(FLOORS) for name in names}
    graph = import_graph()
    unplaced = sorted({room(module) for module in graph} - set(floor))
    assert not unplaced, f"place these in FLOORS: {unplaced}"
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if room(module) != room(target) and floor[room(target)] <= floor[room(module)]
    )
    assert not upward, "imports that do not go down: " + ", ".join(upward)


#: The most lines a module of the package may have: past it, a module holds more than one
#: concept (issue 13).
MAX_MODULE_LINES = 500


def test_the_protocol_core_imports_neither_flask_nor_werkzeug() -> None:
    offenders = sorted(
        f"{module} imports {target}"
        for module, path in package_modules().items()
        if room(module) in FLASK_FREE
        for target in third_party_imports(path)
        if target.split(".")[0] in ("flask", "werkzeug")
    )
    assert not offenders, offenders


def test_the_import_reader_sees_flask_anywhere_in_a_module(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from werkzeug.http import dump_cookie\nimport flask\n")
    assert set(third_party_imports(path)) == {"werkzeug.http", "flask"}


def test_the_package_top_holds_few_modules() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    for folder in (*FLASK_FREE, "web", "providers", "tokens"):
        assert (PACKAGE / folder / "__init__.py").is_file(), folder


def test_no_module_is_over_500_lines() -> None:
    sizes = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert len(sizes) > 100
    too_big = {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert not too_big, f"split these modules (one concept each): {too_big}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_imports_inside_functions_and_type_checking_blocks(
    tmp_path: Path,
) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .b import B\n"
        "def f():\n    from . import c\n    import flask_social_oauth2.d\n"
    )
    path = tmp_path / "a.py"
    path.write_text(source)
    modules = {f"{NAME}.{m}": tmp_path / f"{m}.py" for m in "abcd"}
    assert set(imported_modules(f"{NAME}.a", path, modules)) == {
        f"{NAME}.b",
        f"{NAME}.c",
        f"{NAME}.d",
    }


def test_the_graph_is_not_empty() -> None:
    graph = import_graph()
    assert f"{NAME}.extension" in graph
    assert f"{NAME}.config.settings" in graph[f"{NAME}.extension"] or any(
        f"{NAME}.config.settings" in targets for targets in graph.values()
    )


def modules_after(statements: str) -> list[str]:
    """The names in ``sys.modules`` of a fresh interpreter that has run ``statements``."""
    done = subprocess.run(
        [sys.executable, "-c", f"import sys\n{statements}print(*sorted(sys.modules))\n"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=PACKAGE.parent,  # this package, not another copy on the path
    )
    return done.stdout.split()


def test_importing_the_extension_leaves_the_http_yaml_and_crypto_stacks_for_later() -> None:
    """``from flask_social_oauth2 import SocialOAuth2`` costs little more than Flask: requests,
    PyYAML, oauthlib, cryptography, joserfc and SQLAlchemy are imported when first needed."""
    heavy = {"requests", "urllib3", "yaml", "oauthlib", "cryptography", "joserfc", "sqlalchemy"}
    loaded = modules_after(
        "from flask import Flask\n"
        "from flask_social_oauth2 import SocialOAuth2\n"
        "app = Flask('light')\n"
        "app.config['SOCIAL_OAUTH2_PROVIDERS'] = {'github': {\n"
        "    'authorizationURL': 'https://github.com/login/oauth/authorize',\n"
        "    'accessTokenURL': 'https://github.com/login/oauth/access_token',\n"
        "    'redirectURL': '/authenticate/github', 'clientID': 'i', 'clientSecret': 's'}}\n"
        "SocialOAuth2(app)\n"
    )
    assert f"{NAME}.providers" in loaded
    assert sorted({m.split(".")[0] for m in loaded} & heavy) == []


#: What ``from flask_social_oauth2 import SocialOAuth2`` leaves for ``init_app`` and the first
#: request, so that the import costs little more than Flask's own (the figure README.md gives):
#: the HTTP, YAML, crypto, JOSE, DNS and SQL stacks, and the package's own heavy rooms: the
#: built-in providers, the flow, the token stores and the configuration readers.
HEAVY_AT_IMPORT = (
    *("requests", "urllib3", "yaml", "oauthlib", "requests_oauthlib", "cryptography"),
    *("joserfc", "authlib", "dns", "sqlalchemy"),
    *(
        f"{NAME}.{room}"
        for room in (
            "providers",
            "atproto",
            "web.sign_in",
            "web.form_post",
            "oauth",
            "oidc",
            "tokens",
            "config",
            "options",
            "checks",
        )
    ),
)


def test_importing_the_extension_leaves_the_heavy_modules_for_init_app() -> None:
    """Named modules, not a timing (the benchmarks time the import, ``--only import``, on a
    noisy machine): this fails as soon as one of :data:`HEAVY_AT_IMPORT` comes back into it."""
    loaded = modules_after("import flask\nfrom flask_social_oauth2 import SocialOAuth2\n")
    assert f"{NAME}.extension" in loaded
    heavy = [m for m in loaded if any(m == h or m.startswith(f"{h}.") for h in HEAVY_AT_IMPORT)]
    assert heavy == []


# -- providers are data plus small parts, not a tower ---------------------------------------------

#: How deep a class may sit on the package's own classes (a root class is depth 1).
MAX_CLASS_DEPTH: Final = 3
#: Words a behaviour was once chosen by: the log labels of the requests to a provider.
STEP_NAMES: Final = frozenset({"step", "STEP"})


def class_bases(paths: list[Path]) -> dict[str, list[str]]:
    """Each class defined in ``paths`` (by name), with the names of its bases."""
    bases: dict[str, list[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = bases.setdefault(node.name, [])
                for base in node.bases:
                    if isinstance(base, ast.Name):
                        names.append(base.id)
                    elif isinstance(base, ast.Attribute):
                        names.append(base.attr)
    return bases


def class_depths(bases: dict[str, list[str]]) -> dict[str, int]:
    """How deep each class sits, counting only bases defined among ``bases`` (others, such as
    ``ABC`` or ``Exception``, are outside the package): a root class is depth 1."""
    depths: dict[str, int] = {}

    def depth(name: str, seen: frozenset[str]) -> int:
        if name in depths:
            return depths[name]
        if name not in bases or name in seen:
            return 0
        own = [depth(base, seen | {name}) for base in bases[name] if base in bases]
        depths[name] = 1 + max(own, default=0)
        return depths[name]

    for name in bases:
        depth(name, frozenset())
    return depths


def package_sources() -> list[Path]:
    return [path for path in PACKAGE.rglob("*.py") if "local_idp" not in path.parts]


def test_the_depth_counter_counts_a_four_deep_tower(tmp_path: Path) -> None:
    path = tmp_path / "tower.py"
    path.write_text(
        "from abc import ABC\nimport m\n"
        "class A(ABC): ...\nclass B(A): ...\nclass C(m.B): ...\nclass D(C, Exception): ...\n"
        "class Mixin: ...\nclass E(A, Mixin): ...\n"
    )
    depths = class_depths(class_bases([path]))
    assert depths == {"A": 1, "B": 2, "C": 3, "D": 4, "Mixin": 1, "E": 2}


def test_no_class_is_more_than_three_levels_deep() -> None:
    """A provider is its facts plus small hook objects, not a tower of subclasses: no class
    of the package (the local identity provider aside) sits on more than two of its own.
    Exceptions are left out: their hierarchy is what ``except`` catches (DESIGN.md's errors),
    not behaviour overridden level after level."""
    bases = class_bases(package_sources())
    exceptions = {name for name in bases if _is_exception(name, bases)}
    depths = class_depths({k: v for k, v in bases.items() if k not in exceptions})
    too_deep = {name: depth for name, depth in depths.items() if depth > MAX_CLASS_DEPTH}
    assert not too_deep, too_deep
    assert depths["BuiltinProvider"] == MAX_CLASS_DEPTH  # the counter sees the providers


def test_every_built_in_provider_class_is_data_only() -> None:
    """The class of a built-in provider (the one level the AST cannot see, made by
    ``provider_class``) holds its facts and hooks, never code of its own."""
    from flask_social_oauth2.providers import BUILTIN_PROVIDERS, BuiltinProvider

    code = (classmethod, staticmethod, property, type(lambda: None))
    for cls in BUILTIN_PROVIDERS.values():
        assert cls.__bases__ == (BuiltinProvider,), cls
        assert not [key for key, value in vars(cls).items() if isinstance(value, code)], cls


def _is_exception(name: str, bases: dict[str, list[str]]) -> bool:
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.endswith(("Error", "Exception")):  # ours, or Python's (ValueError, ...)
            return True
        todo.extend(bases.get(current, []))
    return False


def step_label_comparisons(path: Path) -> list[int]:
    """The lines of ``path`` that compare a request's log label (``step``, ``STEP``, or a
    literal such as ``"token request"``) to choose what to do."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            named = operand.id if isinstance(operand, ast.Name) else None
            named = operand.attr if isinstance(operand, ast.Attribute) else named
            literals = [operand] if isinstance(operand, ast.Constant) else []
            if isinstance(operand, ast.Tuple | ast.List | ast.Set):
                literals = [e for e in operand.elts if isinstance(e, ast.Constant)]
            labels = [c.value for c in literals if isinstance(c.value, str)]
            if named in STEP_NAMES or any(label.endswith(" request") for label in labels):
                lines.append(node.lineno)
                break
    return lines


def test_the_label_finder_finds_a_step_comparison(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        'if step in ("token request", "refresh request"): pass\n'
        'if kind == "refresh request": pass\n'
        "if par.STEP != x: pass\n"
        'if method == "POST": pass\n'
    )
    assert step_label_comparisons(path) == [1, 2, 3]


def test_no_behaviour_is_chosen_by_a_log_label() -> None:
    """What a request is for is passed explicitly (its URL, its fields, a hook), never read
    back from the label it is logged with."""
    found = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in package_sources()
        if (lines := step_label_comparisons(path))
    }
    assert not found, found


#: Modules outside config/ that may take a block's ``customProperties`` whole (never by key):
#: the CLI shows them masked, Bluesky's settings gain the client authentication they imply
#: before they are parsed, and the docs list the keys a provider's facts name
#: (``ProviderFacts.custom_properties``, a tuple of key names).
WHOLE_CUSTOM_PROPERTIES: Final = frozenset({"cli.py", "providers/bluesky.py", "providers/docs.py"})


def custom_property_reads(path: Path) -> list[tuple[int, str]]:
    """Where ``path`` reads ``.custom_properties``: ``"key"`` for one key (``.get(...)``,
    ``[...]``, ``in``, ``.setdefault``, ``.pop``), ``"whole"`` for the mapping itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == "custom_properties"):
            continue
        parent = parents.get(node)
        by_key = (
            (isinstance(parent, ast.Attribute) and parent.attr in ("get", "setdefault", "pop"))
            or (isinstance(parent, ast.Subscript) and parent.value is node)
            or (
                isinstance(parent, ast.Compare)
                and node in parent.comparators
                and any(isinstance(op, ast.In | ast.NotIn) for op in parent.ops)
            )
        )
        found.append((node.lineno, "key" if by_key else "whole"))
    return sorted(found)


def test_the_property_reader_finder_sees_every_form(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        'a = settings.custom_properties.get("issuer")\n'
        'b = self.settings.custom_properties["dpop"]\n'
        'c = "title" not in provider.settings.custom_properties\n'
        "d = settings.custom_properties\n"
        "e = settings.replace(custom_properties={})\n"
        "f = dict(settings.custom_properties)\n"
    )
    assert custom_property_reads(path) == [
        (1, "key"),
        (2, "key"),
        (3, "key"),
        (4, "whole"),
        (6, "whole"),
    ]


def test_no_module_outside_config_reads_custom_properties_by_key() -> None:
    """A block's ``customProperties`` are parsed once, in config/ (``ProviderOptions``, or a
    provider's own record its hooks parse with the same reader); everything else reads the
    records' attributes."""
    found: dict[str, list[tuple[int, str]]] = {}
    for path in package_sources():
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith("config/"):
            continue
        for line, kind in custom_property_reads(path):
            if kind == "whole" and where in WHOLE_CUSTOM_PROPERTIES:
                continue
            found.setdefault(where, []).append((line, kind))
    assert not found, found
