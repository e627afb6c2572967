"""Settings: validation with named messages, both spellings, and the README kept in step with the table."""

from __future__ import annotations

from margin.server.settings import DEFAULTS, SETTINGS, markdown_table, parse_settings

from conftest import REPO


def test_nested_and_dotted_spellings_agree() -> None:
    nested, nested_problems = parse_settings({"margin": {"readability": {"threshold": 12, "minWords": 3}}})
    dotted, dotted_problems = parse_settings({"readability.threshold": 12, "readability.minWords": 3})
    assert nested == dotted
    assert nested.readability_threshold == 12.0 and nested.readability_min_words == 3
    assert nested_problems == dotted_problems == []


def test_invalid_value_is_named_and_default_used() -> None:
    settings, problems = parse_settings({"readability": {"threshold": "high", "enabled": "yes"}})
    assert settings.readability_threshold == DEFAULTS.readability_threshold
    assert settings.readability_enabled is True
    assert any("margin.readability.threshold" in problem and "'high'" in problem for problem in problems)
    assert any("margin.readability.enabled" in problem for problem in problems)


def test_out_of_range_and_wrong_kind_and_unknown() -> None:
    settings, problems = parse_settings(
        {"readability.minWords": 2.5, "maxFileSizeMB": -1, "logLevel": "loud", "colour": "blue"}
    )
    assert settings == DEFAULTS
    assert len(problems) == 4
    assert any("margin.colour" in problem for problem in problems)


def test_non_object_settings_fall_back_to_defaults() -> None:
    settings, problems = parse_settings(["not", "an", "object"])
    assert settings == DEFAULTS and problems


def test_readme_documents_every_setting_exactly() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- settings-table:start -->") + len("<!-- settings-table:start -->")
    end = readme.index("<!-- settings-table:end -->")
    assert readme[start:end].strip() == markdown_table()
    assert len(SETTINGS) == markdown_table().count("\n") - 1
