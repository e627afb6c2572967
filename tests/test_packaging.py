"""Packaging: every source package installs under `margin.`, so no generic top-level names land in site-packages."""

from __future__ import annotations

import importlib
import tomllib

from conftest import REPO

FOLDERS = {"server": "margin.server", "workflows": "margin.workflows", "prompts": "margin.prompts"}


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
