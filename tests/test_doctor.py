"""`margin doctor` (diagnose() and the CLI) against real scripted endpoints and dead ports, and the llm.* and
cache.* settings that feed it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from margin.server.cli import main
from margin.server.cli.exit_status import NO_MODEL as EXIT_NO_MODEL
from margin.server.cli.exit_status import OK as EXIT_OK
from margin.server.render import render_doctor
from margin.server.settings import DEFAULTS, SETTINGS, parse_settings
from margin.testing.scripted_endpoint import Reply, Rule
from margin.workflows.llm.config import AUTO, LLMConfig, RoleRoute
from margin.workflows.llm.doctor import diagnose
from margin.workflows.llm.types import StructuredMode

from conftest import ScriptedFactory, llm_config

DOCTOR_ANSWER = {"status": "ok", "numbers": [1, 2, 3]}


def settings_file(tmp_path: Path, **extra: Any) -> Path:
    path = tmp_path / "settings.json"
    values = {"cache": {"path": str(tmp_path / "cache.sqlite3")}, "llm": {"retries": 0, "timeoutSeconds": 5}}
    values.update(extra)
    path.write_text(json.dumps({"margin": values}), encoding="utf-8")
    return path


def assert_both_ways_out(text: str, url: str) -> None:
    assert url in text
    assert "vllm serve" in text
    assert "margin[local]" in text


# -- diagnose() ----------------------------------------------------------------------------------------------


async def test_diagnose_reports_url_first_model_mode_and_round_trip(
    scripted: ScriptedFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(role="doctor", replies=[Reply(json=DOCTOR_ANSWER)]), models=("first-model", "second")
    )
    report = await diagnose(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert report.ok
    (default,) = report.endpoints
    assert default.roles == ["default"]
    assert default.base_url == endpoint.base_url
    assert default.model == "first-model" and default.models == ["first-model", "second"]
    assert default.structured_mode == "json_schema"
    assert default.round_trip_seconds is not None and 0 < default.round_trip_seconds < 5
    assert default.error is None and default.warning is None
    (call,) = endpoint.calls()  # one structured call, never served from the cache
    assert (
        call.role == "doctor"
        and call.response_format == "json_schema"
        and call.body["model"] == "first-model"
    )
    assert report.cache is not None and report.cache["entries"] == 0
    text = render_doctor(report)
    assert (
        endpoint.base_url in text and "first-model" in text and "json_schema" in text and "round trip" in text
    )
    assert "the reader is the same model as the journalist" in text  # and how to route a smaller one


async def test_diagnose_never_answers_from_the_cache(scripted: ScriptedFactory, tmp_path: Path) -> None:
    endpoint = scripted(Rule(role="doctor", replies=[Reply(json=DOCTOR_ANSWER)]))
    config = llm_config(endpoint.base_url, tmp_path / "cache.sqlite3")
    await diagnose(config)
    report = await diagnose(config)
    assert report.ok and len(endpoint.calls()) == 2


async def test_diagnose_reports_the_negotiated_fallback_mode(
    scripted: ScriptedFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(role="doctor", replies=[Reply(json=DOCTOR_ANSWER)]),
        accepted_formats=("json_object", "text"),
        rejected_format_status=500,
    )
    report = await diagnose(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=2))
    assert report.ok and report.endpoints[0].structured_mode == "json_object"


async def test_diagnose_dead_url_names_the_url_and_both_ways_out(dead_url: str, tmp_path: Path) -> None:
    report = await diagnose(llm_config(dead_url, tmp_path / "cache.sqlite3"))
    assert not report.ok
    (default,) = report.endpoints
    assert default.error is not None
    assert_both_ways_out(default.error, dead_url)
    assert "not usable" in render_doctor(report)


async def test_diagnose_dead_url_with_a_named_model_still_names_both_ways_out(
    dead_url: str, tmp_path: Path
) -> None:
    report = await diagnose(llm_config(dead_url, tmp_path / "cache.sqlite3", retries=0, model="my-model"))
    assert not report.ok
    assert report.endpoints[0].error is not None
    assert_both_ways_out(report.endpoints[0].error, dead_url)


async def test_diagnose_weak_model_is_a_warning_not_an_error(
    scripted: ScriptedFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(role="doctor", replies=[Reply(content="OK! 1, 2, 3")]))
    report = await diagnose(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert report.ok
    (default,) = report.endpoints
    assert default.error is None
    assert default.warning is not None and "invalid_output" in default.warning
    assert default.round_trip_seconds is not None
    assert len(endpoint.calls()) == 2  # the check and its one repair
    assert "warning:" in render_doctor(report)


async def test_diagnose_weak_model_still_reports_the_negotiated_mode(
    scripted: ScriptedFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(role="doctor", replies=[Reply(content="OK! 1, 2, 3")]))
    report = await diagnose(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert report.endpoints[0].structured_mode == "json_schema"


async def test_diagnose_checks_each_role_route_once(
    scripted: ScriptedFactory, dead_url: str, tmp_path: Path
) -> None:
    main_endpoint = scripted(Rule(replies=[Reply(json=DOCTOR_ANSWER)]), models=("big",))
    second = scripted(Rule(replies=[Reply(json=DOCTOR_ANSWER)]), models=("second-listed",))
    config = llm_config(
        main_endpoint.base_url,
        tmp_path / "cache.sqlite3",
        roles={
            "reader": RoleRoute(base_url=second.base_url, model="small"),
            "layperson": RoleRoute(base_url=second.base_url, model="small"),
            "judge": RoleRoute(base_url=dead_url),
        },
    )
    report = await diagnose(config)
    assert report.ok  # the default endpoint works
    by_roles = {tuple(endpoint.roles): endpoint for endpoint in report.endpoints}
    assert set(by_roles) == {("default",), ("reader", "layperson"), ("judge",)}
    assert by_roles[("reader", "layperson")].model == "small" and by_roles[("reader", "layperson")].ok
    assert [call.role for call in second.calls()] == ["reader"]
    judge = by_roles[("judge",)]
    assert judge.error is not None and dead_url in judge.error
    text = render_doctor(report)
    assert "reader, layperson" in text and "judge" in text and "not usable" in text
    assert "lay articles (JRE-L): the reader is small, the journalist the default model" in text


async def test_diagnose_without_cache_reports_cache_off(scripted: ScriptedFactory, tmp_path: Path) -> None:
    endpoint = scripted(Rule(replies=[Reply(json=DOCTOR_ANSWER)]))
    cache_path = tmp_path / "cache.sqlite3"
    report = await diagnose(llm_config(endpoint.base_url, cache_path, cache_enabled=False))
    assert report.cache is None and "cache: off" in render_doctor(report)
    assert not cache_path.exists()


# -- the CLI -------------------------------------------------------------------------------------------------


def test_cli_doctor_exits_0_on_a_working_endpoint(
    scripted: ScriptedFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = scripted(Rule(role="doctor", replies=[Reply(json=DOCTOR_ANSWER)]), models=("served-model",))
    code = main(["doctor", "--endpoint", endpoint.base_url, "--settings", str(settings_file(tmp_path))])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert endpoint.base_url in out and "served-model" in out and "json_schema" in out
    assert str(tmp_path / "cache.sqlite3") in out
    assert err == ""


def test_cli_doctor_exits_3_with_a_readable_reason_on_a_dead_endpoint(
    dead_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--endpoint", dead_url, "--settings", str(settings_file(tmp_path))])
    out, err = capsys.readouterr()
    assert code == EXIT_NO_MODEL == 3
    assert err.startswith("margin: no usable LLM endpoint:")
    assert_both_ways_out(err, dead_url)
    assert "Traceback" not in err and "not usable" in out


def test_cli_doctor_endpoint_with_an_impossible_port_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "http://127.0.0.1:80000/v1"
    try:
        code = main(["doctor", "--endpoint", url, "--settings", str(settings_file(tmp_path))])
    except Exception as error:  # report the crash as this test's failure, not an error
        pytest.fail(f"margin doctor crashed: {error!r}")
    assert code == EXIT_NO_MODEL
    assert url in capsys.readouterr().err


def test_cli_doctor_weak_model_warns_but_exits_0(
    scripted: ScriptedFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = scripted(Rule(role="doctor", replies=[Reply(content="{'status': 'ok'}")]))
    code = main(["doctor", "--endpoint", endpoint.base_url, "--settings", str(settings_file(tmp_path))])
    out, _ = capsys.readouterr()
    assert code == EXIT_OK
    assert "warning:" in out and "not with usable JSON" in out


def test_cli_doctor_flags_override_the_settings_file(
    scripted: ScriptedFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = scripted(Rule(role="doctor", replies=[Reply(json=DOCTOR_ANSWER)]), models=("listed",))
    settings = settings_file(tmp_path, llm={"endpoint": "http://127.0.0.1:9/v1", "model": "from-file"})
    code = main(
        [
            "doctor",
            "--endpoint",
            endpoint.base_url,
            "--model",
            "from-flag",
            "--no-cache",
            "--settings",
            str(settings),
        ]
    )
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert [call.body["model"] for call in endpoint.calls()] == ["from-flag"]
    assert "cache: off" in out and not (tmp_path / "cache.sqlite3").exists()


def test_cli_doctor_unreadable_settings_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "settings.json"
    broken.write_text("{not json", encoding="utf-8")
    assert main(["doctor", "--settings", str(broken)]) == 2
    assert "cannot read settings file" in capsys.readouterr().err


# -- llm.* and cache.* settings ------------------------------------------------------------------------------


def test_default_settings_give_the_default_llm_config() -> None:
    assert DEFAULTS.llm_config() == LLMConfig()
    config = DEFAULTS.llm_config()
    assert (
        config.default.base_url == AUTO
        and config.default.model is None
        and config.default.api_key_env is None
    )
    assert config.cache_path is None and config.cache_enabled


def test_llm_config_maps_every_llm_and_cache_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    raw = {
        "llm.endpoint": "http://gpu-box:8000/v1",
        "llm.apiKeyEnv": "MARGIN_KEY",
        "llm.model": "qwen-32b",
        "llm.temperature": 0.7,
        "llm.topP": 0.9,
        "llm.maxTokens": 2048,
        "llm.timeoutSeconds": 30,
        "llm.maxConcurrency": 16,
        "llm.structuredOutput": "json_object",
        "llm.retries": 5,
        "llm.roles": {
            "reader": {"endpoint": "http://localhost:8001/v1", "model": "small", "apiKeyEnv": "READER_KEY"},
            "judge": {"model": "judge-model"},
        },
        "cache.enabled": False,
        "cache.maxSizeMB": 2.5,
        "cache.path": "~/margin/cache.sqlite3",
    }
    llm_keys = {spec.key for spec in SETTINGS if spec.key.startswith(("llm.", "cache."))}
    assert set(raw) == llm_keys, "a new llm.*/cache.* setting needs a line here (and in Settings.llm_config)"
    settings, problems = parse_settings({"margin": raw})
    assert problems == []
    config = settings.llm_config()
    default = config.default
    assert default.base_url == "http://gpu-box:8000/v1" and default.api_key_env == "MARGIN_KEY"
    assert default.model == "qwen-32b" and default.temperature == 0.7 and default.top_p == 0.9
    assert default.max_tokens == 2048 and default.timeout == 30.0 and default.max_concurrency == 16
    assert default.structured_mode is StructuredMode.JSON_OBJECT
    assert config.retries == 5
    assert config.roles == {
        "reader": RoleRoute(base_url="http://localhost:8001/v1", model="small", api_key_env="READER_KEY"),
        "judge": RoleRoute(model="judge-model"),
    }
    assert config.cache_enabled is False
    assert config.cache_max_bytes == int(2.5 * 1024 * 1024)
    assert config.cache_path == tmp_path / "margin" / "cache.sqlite3"
    reader = config.endpoint_for("reader")
    assert (reader.base_url, reader.model, reader.api_key_env) == (
        "http://localhost:8001/v1",
        "small",
        "READER_KEY",
    )
    assert reader.max_tokens == 2048  # everything else from the default endpoint
    judge = config.endpoint_for("judge")
    assert (judge.base_url, judge.model) == ("http://gpu-box:8000/v1", "judge-model")
    assert config.endpoint_for("journalist") == default


def test_nested_and_dotted_role_routes_agree() -> None:
    routes = {"reader": {"endpoint": "http://localhost:8001/v1", "model": "small"}}
    nested, nested_problems = parse_settings({"margin": {"llm": {"roles": routes}}})
    dotted, dotted_problems = parse_settings({"llm.roles": routes})
    assert nested == dotted and nested_problems == dotted_problems == []
    assert nested.llm_config().roles["reader"] == RoleRoute("http://localhost:8001/v1", "small")


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ({"reviewr": {"model": "x"}}, "unknown agent role 'reviewr'"),
        ({"reader": "small"}, "the route for 'reader' must be an object"),
        (
            {"reader": {"url": "http://localhost:8001/v1"}},
            "the route for 'reader' must be an object with some of",
        ),
        ({"reader": {"endpoint": 8001}}, "endpoint must be a string or a non-empty list of URLs"),
        ({"reader": {"endpoint": []}}, "endpoint must be a string or a non-empty list of URLs"),
        ({"reader": {"endpoint": ["auto", "http://b:8000/v1"]}}, 'lists "auto" among replicas'),
        ({"reader": {"model": None}}, "the route for 'reader' must have string values"),
        ("reader=small", "must be an object mapping agent roles"),
    ],
)
def test_bad_role_routes_are_named_and_the_default_used(routes: Any, message: str) -> None:
    settings, problems = parse_settings({"llm": {"roles": routes, "model": "kept"}})
    assert settings["llm.roles"] == {}
    assert settings["llm.model"] == "kept"  # one bad setting does not spoil the others
    assert len(problems) == 1
    assert "margin.llm.roles" in problems[0] and message in problems[0]
    assert settings.llm_config().roles == {}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("llm.structuredOutput", "json"),
        ("llm.maxConcurrency", 0),
        ("llm.retries", 11),
        ("llm.temperature", "hot"),
        ("llm.timeoutSeconds", 0.5),
        ("llm.maxTokens", 10.5),
        ("cache.enabled", "yes"),
        ("cache.maxSizeMB", 0),
        ("llm.endpoint", 8000),
    ],
)
def test_bad_llm_and_cache_values_are_named_and_the_default_used(key: str, value: Any) -> None:
    settings, problems = parse_settings({key: value})
    assert settings[key] == DEFAULTS[key]
    assert len(problems) == 1 and f"margin.{key}" in problems[0] and repr(value) in problems[0]
    assert settings.llm_config() == LLMConfig()


def test_empty_strings_mean_auto_and_first_listed_model() -> None:
    settings, problems = parse_settings(
        {
            "llm": {
                "endpoint": "",
                "model": "",
                "apiKeyEnv": "",
                "roles": {"reader": {"endpoint": "", "model": ""}},
            }
        }
    )
    assert problems == []
    config = settings.llm_config()
    assert (config.default.base_url, config.default.model, config.default.api_key_env) == (AUTO, None, None)
    assert config.endpoint_for("reader") == config.default
