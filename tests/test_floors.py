"""The floors and the rooms of experiments/ (docs/architecture.md), read from every module's imports."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "indexes", "readers", "retrievers", "compressors", "experiments")
# which top-level packages each package may import; the ground, core/, is open to all and imports none
ALLOWED = {
    "core": {"core"},
    "indexes": {"indexes", "core"},
    "readers": {"readers", "core"},
    "retrievers": {"retrievers", "indexes", "core"},
    "compressors": {"compressors", "indexes", "retrievers", "readers", "core"},
    "experiments": set(PACKAGES),
}
# rooms of experiments/, bottom up; a room may import only rooms at its own level or below
ROOMS = [{"inference"}, {"data"}, {"tasks", "protocols"}, {"scoring"}, {"report"}, {"view"}, {"run"}, {"design", "judge"},
         {"cli"}]


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (imports inside functions count too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n.split(".")[0] in PACKAGES}


def _modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def test_no_import_runs_up_a_floor():
    wrong = []
    for package in PACKAGES:
        for path in _modules(package):
            for name in _imports(path):
                if name.split(".")[0] not in ALLOWED[package]:
                    wrong.append(f"{path.relative_to(REPO)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_rooms_of_experiments_import_only_downwards():
    level = {room: i for i, rooms in enumerate(ROOMS) for room in rooms}
    wrong = []
    for path in _modules("experiments"):
        parts = path.relative_to(REPO / "experiments").parts
        if len(parts) < 2 or parts[0] not in level:
            continue
        for name in _imports(path):
            target = name.split(".")
            if len(target) > 1 and target[0] == "experiments" and target[1] in level and level[target[1]] > level[parts[0]]:
                wrong.append(f"{path.relative_to(REPO)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_room_holds_more_than_about_twelve_modules():
    for room in (REPO / "experiments").iterdir():
        if room.is_dir() and (room / "__init__.py").exists():
            modules = [p for p in room.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
            assert len(modules) <= 12, (room.name, len(modules))


def test_the_product_never_imports_the_test_doubles():
    """``testkit/`` (doubles that tests and benchmarks share) and ``tests/`` are never imported by the product."""
    for package in PACKAGES:
        for path in _modules(package):
            assert not any(n.split(".")[0] in ("tests", "testkit") for n in _imports_all(path)), path


def _imports_all(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names
