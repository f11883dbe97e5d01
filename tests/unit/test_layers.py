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
    "paths": 0,
    "secrecy": 0,
    "text": 0,
    "seal": 0,
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
    "tiktoken": ("llm/tokens.py",),
    "openai": ("llm/providers.py",),
    "anthropic": ("llm/providers.py",),
    "google": ("llm/providers.py",),
}


def _part(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


# acp and cli are peers; the CLI may only start the server and print a session's replay (what a client sees).
CLI_MAY_USE_ACP = {"codling.acp.server", "codling.acp.replay"}

MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_respects_layers_and_confinement(path: Path) -> None:
    part = _part(path)
    rel = str(path.relative_to(SRC))
    for name in _imports(path):
        top, _, rest = name.partition(".")
        if top == "codling" and rest:
            target = rest.split(".")[0]
            allowed = LAYERS[target] < LAYERS[part] or target == part or LAYERS[target] == LAYERS[part] == 0
            if {part, target} == {"acp", "cli"}:
                allowed = part == "cli" and name in CLI_MAY_USE_ACP
            assert allowed, f"{rel} imports {name}: {part} may not depend on {target}"
        elif top in CONFINED:
            homes = CONFINED[top]
            assert any(rel == h or part == h for h in homes), f"{rel} imports {top}, allowed only in {homes}"


def test_the_rule_sees_lazy_imports() -> None:
    # brain/drive.py imports pydantic-ai inside functions; the walk must find those imports.
    assert "pydantic_ai.exceptions" in _imports(SRC / "brain" / "drive.py")
