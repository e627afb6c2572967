"""Sampling as the papers set it, per pipeline, and a role's own over it: what the endpoint receives."""

from __future__ import annotations

from pathlib import Path

from margin.server.settings import parse_settings
from margin.testing.scripted_agents import rewrite_rules
from margin.workflows.rewrite import agentsimp, jrel
from margin.workflows.rewrite.types import Language

from conftest import (
    PAPER_MAIN,
    ClientFactory,
    ScriptedFactory,
    chat_requests_in_order,
    llm_config,
    load_manuscript,
)


async def test_jrel_samples_as_its_paper_and_a_route_overrides_one_role(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    settings, problems = parse_settings(
        {"llm": {"temperature": 0.2, "roles": {"reader": {"topP": 0.9, "frequencyPenalty": 0.0}}}}
    )
    assert problems == []
    endpoint = scripted(*rewrite_rules())
    config = llm_config(
        endpoint.base_url,
        tmp_path / "cache.sqlite3",
        cache_enabled=False,
        model="m",
        roles=settings.llm_config().roles,
    )
    await jrel.write_lay_article(
        load_manuscript(PAPER_MAIN), llm_clients(config), jrel.LayOptions(iterations=1)
    )
    bodies = {request.role: request.body for request in chat_requests_in_order(endpoint)}
    journalist, editor, reader = bodies["journalist"], bodies["editor"], bodies["reader"]
    assert (journalist["top_p"], journalist["frequency_penalty"]) == (0.4, 1.0)  # the paper's
    assert (editor["top_p"], editor["frequency_penalty"]) == (0.4, 1.0)
    assert journalist["temperature"] == 0.2  # the paper leaves it at the default: the endpoint setting's
    assert (reader["top_p"], reader["frequency_penalty"]) == (0.9, 0.0)  # the role's own route wins


async def test_agentsimp_samples_at_the_papers_temperature(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(*rewrite_rules())
    config = llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", cache_enabled=False, model="m")
    await agentsimp.simplify_document(
        ["One paragraph with enough words to simplify.", "Another paragraph, also with enough words."],
        Language.MARKDOWN,
        llm_clients(config),
    )
    requests = chat_requests_in_order(endpoint)
    assert requests and all(request.body["temperature"] == 0.6 for request in requests)
    assert all("frequency_penalty" not in request.body for request in requests)


def test_a_route_with_an_impossible_sampling_value_is_refused_by_name() -> None:
    _, problems = parse_settings({"llm": {"roles": {"reader": {"topP": 3}}}})
    assert problems and "topP from 0 to 1" in problems[0]
