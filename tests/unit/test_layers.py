"""The dependency rule of DESIGN.md section 1, checked on every module's imports (including lazy ones)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "codling"

# Layer of each top-level part of the package, lowest first; a module may import its own layer and lower ones.
LAYERS = {
    "errors": 0,
    "config": 0,
    "credentials": 0,
    "paths": 0,
    "secrecy": 0,
    "text": 0,
    "seal": 0,
    "startup": 0,
    "mcp_servers": 0,
    "permission_rules": 0,
    "vocabulary": 0,
    "shutdown": 0,
    "__init__": 0,
    "llm": 1,
    "tools": 2,
    "brain": 3,
    "store": 4,
    "acp": 5,
    "cli": 5,
    "__main__": 6,
}

# Third-party packages that may only be imported from one place.
CONFINED = {
    "acp": ("acp",),
    "typer": ("cli",),
    "rich": ("cli",),
    "prompt_toolkit": ("cli",),
    "tiktoken": ("llm/tokens.py",),
    "openai": ("llm/providers.py", "llm/openai_client.py"),
    "anthropic": ("llm/providers.py",),
    "google": ("llm/providers.py",),
    "fastmcp": ("tools/mcp/connect.py",),
    "mcp": ("tools/mcp/connect.py",),
    "pydantic_ai.mcp": ("tools/mcp/connect.py",),
}


def _imports(path: Path, *, with_names: bool = False) -> list[str]:
    """The modules ``path`` imports, lazy and type-only imports included; relative imports made absolute.
    ``with_names`` adds ``X.a`` for each ``from X import a`` (``a`` may be a submodule)."""
    rel = path.relative_to(SRC)
    return _imported(path.read_text(), ("codling", *rel.parent.parts), with_names=with_names)


def _imported(source: str, package: tuple[str, ...], *, with_names: bool = False) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join((*base, *([node.module] if node.module else [])))
            names.append(module)
            if with_names:
                names.extend(f"{module}.{alias.name}" for alias in node.names)
    return names


def _violations(rel: str, names: list[str]) -> list[str]:
    """What breaks the layer rule or a confinement among the imports ``names`` of the module at ``rel``."""
    part = rel.split("/")[0].removesuffix(".py")
    found: list[str] = []
    for name in names:
        top, _, rest = name.partition(".")
        if top == "codling" and rest:
            target = rest.split(".")[0]
            allowed = LAYERS[target] < LAYERS[part] or target == part or LAYERS[target] == LAYERS[part] == 0
            if {part, target} == {"acp", "cli"}:
                allowed = part == "cli" and name in CLI_MAY_USE_ACP
            if not allowed:
                found.append(f"{rel} imports {name}: {part} may not depend on {target}")
        for confined, homes in CONFINED.items():
            if (name == confined or name.startswith(confined + ".")) and not any(rel == h or part == h for h in homes):
                found.append(f"{rel} imports {name}, allowed only in {homes}")
    return found


# acp and cli are peers; the CLI may only start the server and print a session's replay (what a client sees).
CLI_MAY_USE_ACP = {"codling.acp.serving", "codling.acp.replay"}

MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_respects_layers_and_confinement(path: Path) -> None:
    assert _violations(str(path.relative_to(SRC)), _imports(path)) == []


def test_the_rule_sees_lazy_imports() -> None:
    # brain/drive.py imports pydantic-ai inside functions; the walk must find those imports.
    assert "pydantic_ai.exceptions" in _imports(SRC / "brain" / "drive.py")


def test_the_rule_sees_relative_imports() -> None:
    source = "from ..acp import server\nfrom . import files\nfrom .mcp.connect import x\n"
    names = _imported(source, ("codling", "tools"), with_names=True)
    assert names == [
        "codling.acp",
        "codling.acp.server",
        "codling.tools",
        "codling.tools.files",
        "codling.tools.mcp.connect",
        "codling.tools.mcp.connect.x",
    ]
    assert _violations("tools/files.py", names) == [
        "tools/files.py imports codling.acp: tools may not depend on acp",
        "tools/files.py imports codling.acp.server: tools may not depend on acp",
    ]


# --- import circles --------------------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_graph() -> dict[str, set[str]]:
    """codling's modules (without the ``codling.`` prefix) and the codling modules each imports, type-only and
    lazy imports included; importing a package's submodule is not counted as importing the package."""
    names = {_module_name(p): p for p in MODULES}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        targets: set[str] = set()
        for full in _imports(path, with_names=True):
            target = full.removeprefix("codling.")
            if full.startswith("codling.") and target in names and target != name:
                targets.add(target)
        # "from codling.brain.context import compaction" names the package too: that edge is the submodule's.
        graph[name] = {t for t in targets if not any(u.startswith(t + ".") for u in targets)}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles() -> None:
    # The turn loop, special turns, compaction and delegates type against brain/host.py's SessionHost; the
    # toolset imports the tools, which import ToolDeps and the descriptors from modules below it.
    assert _circles(_module_graph()) == []


def test_the_circle_check_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
