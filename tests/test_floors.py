"""The floors and the rooms of experiments/ (docs/architecture.md), read from every module's imports."""
from __future__ import annotations

import ast
import re
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
# rooms of experiments/, bottom up; a room may import only rooms at its own level or below (scoring sits beside
# tasks: a benchmark's folder registers its metrics, and scoring asks a task its metric)
ROOMS = [{"inference"}, {"data"}, {"tasks", "protocols", "scoring"}, {"report"}, {"view"}, {"run"}, {"design", "judge"},
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


# where nothing may know a compressor by its name (DESIGN.md, "One place per extension"): what differs between
# compressors is read from their class or their result, so a plugin gets what a built-in gets
NAME_BLIND = ("experiments/view", "experiments/report", "experiments/run/estimate.py", "experiments/run/plan.py")


def _name_blind_files(suffix: str) -> list[Path]:
    out: list[Path] = []
    for place in NAME_BLIND:
        path = REPO / place
        out += [path] if path.is_file() and path.suffix == suffix else sorted(path.rglob(f"*{suffix}"))
    return out


def _compressor_attributes() -> set[str]:
    """What the built-in compressors hold beyond the ``Compressor`` contract: their classes' names and what their
    ``__init__`` sets on ``self`` (``_chunker``, ``retriever``, ``max_new_tokens``, ...)."""
    from compressors.base import Compressor
    from compressors.registry import COMPRESSORS

    own: set[str] = set()
    for _, cls in COMPRESSORS.items():
        cls = COMPRESSORS.get(cls) if isinstance(cls, str) else cls
        own |= set(vars(cls))
        source = Path(__import__(cls.__module__, fromlist=["_"]).__file__)
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                    and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
    return own - set(dir(Compressor))


def test_no_compressor_name_kind_or_attribute_downstream():
    from compressors.registry import COMPRESSORS

    names = set(COMPRESSORS.names())
    attributes = _compressor_attributes()
    assert {"_chunker", "retriever", "max_new_tokens"} <= attributes  # the rule below reads what it should
    wrong = []
    for path in _name_blind_files(".py"):
        where = path.relative_to(REPO)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                wrong.append(f"{where}:{node.lineno} names compressor {node.value!r}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                    "getattr", "hasattr", "setattr") and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                    and node.args[1].value in attributes:
                wrong.append(f"{where}:{node.lineno} reads a compressor's {node.args[1].value!r}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and node.attr in attributes:
                wrong.append(f"{where}:{node.lineno} reads a compressor's private {node.attr!r}")
    for path in _name_blind_files(".js"):
        text = path.read_text(encoding="utf-8")
        for name in names:
            for match in re.finditer(rf"""["']{re.escape(name)}["']""", text):
                wrong.append(f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1} names {name!r}")
    assert not wrong, "\n".join(wrong)
