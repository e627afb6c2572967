"""Packaging: every source package installs under `margin.`, so no generic top-level names land in site-packages."""

from __future__ import annotations

import ast
import importlib
import tomllib

from conftest import REPO

FOLDERS = {
    "server": "margin.server",
    "workflows": "margin.workflows",
    "prompts": "margin.prompts",
    "testing": "margin.testing",
}


def _declared() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["setuptools"]["packages"]


def test_every_package_folder_is_declared_under_margin() -> None:
    declared = set(_declared())
    found = set()
    for folder, package in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder)
            found.add(".".join([package, *relative.parts]))
    assert found == declared
    assert all(name.startswith("margin.") for name in declared)


def test_declared_packages_import_from_the_installed_distribution() -> None:
    for name in _declared():
        module = importlib.import_module(name)
        assert module.__file__ is not None


def test_shipped_code_does_not_import_the_test_doubles() -> None:
    # margin.testing (the scripted endpoint and agents) serves tests and benchmarks; the server and the
    # workflows must work without it.
    offenders = []
    for folder in ("server", "workflows", "prompts"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
                    names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
                else:
                    continue
                if any(name == "margin.testing" or name.startswith("margin.testing.") for name in names):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []
