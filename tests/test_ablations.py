"""The papers' ablations as switches: each leaves exactly its agents out of the conversation, from the settings
(as `margin eval --settings` and the editor use them) down to the requests the endpoint receives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from margin.server.settings import parse_settings
from margin.testing.scripted_agents import rewrite_rules
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.rewrite import agentsimp, jrel, soms
from margin.workflows.rewrite.types import Language

from conftest import (
    ClientFactory,
    ScriptedFactory,
    chat_requests_in_order,
    feedback_llm_config,
    final_user_message,
)

PARAGRAPHS = [
    "Posting lists are pruned to a fixed budget per section, which bounds the memory the index needs.",
    "The regularizer pulls term weights toward a prior estimated from eligibility criteria.",
    "Recall at the screening threshold rises by four points over the unpruned index.",
]


def settings(**section: Any) -> Any:
    values, problems = parse_settings(section)
    assert problems == []
    return values


async def roles_of(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, run: Any
) -> list[str]:
    endpoint = scripted(*rewrite_rules())
    await run(llm_clients(feedback_llm_config(endpoint, tmp_path, cache_enabled=False)))
    return [str(request.role) for request in chat_requests_in_order(endpoint)]


# -- JRE-L (its Table 3) -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ablation", "each_iteration", "journalist_reads"),
    [
        ("none", ["reader", "editor", "journalist"], "The editor's advice"),
        ("noReader", ["editor", "journalist"], "The editor's advice"),
        ("noEditor", ["reader", "journalist"], "A general reader's notes"),
        ("noCollaboration", ["journalist"], "Revise your article"),
    ],
)
async def test_jrel_ablations_leave_out_the_reader_the_editor_or_both(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    paper: Manuscript,
    ablation: str,
    each_iteration: list[str],
    journalist_reads: str,
) -> None:
    options = settings(lay={"ablation": ablation, "iterations": 2}).lay_options()
    endpoint = scripted(*rewrite_rules())
    client = llm_clients(feedback_llm_config(endpoint, tmp_path, cache_enabled=False))
    article = await jrel.write_lay_article(paper, client, options)
    requests = chat_requests_in_order(endpoint)
    assert [request.role for request in requests] == ["journalist", *each_iteration * 2]
    assert article.ok and len(article.versions) == 3
    assert journalist_reads in final_user_message(requests[-1])
    if ablation == "noReader":
        assert "reader's notes" not in final_user_message(next(r for r in requests if r.role == "editor"))


# -- the Society of Medical Simplifiers: the layperson loop alone ------------------------------------------------


async def test_soms_with_only_the_layperson_loop_runs_no_clarifier_redundancy_checker_or_selector(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    options = settings(simplify={"somsLoops": "laypersonOnly", "loopLimit": 2}).soms_options()

    async def run(client: Any) -> None:
        rewrite = await soms.simplify_paragraph(PARAGRAPHS[0], Language.MARKDOWN, client, options)
        assert rewrite.text

    roles = await roles_of(scripted, llm_clients, tmp_path, run)
    assert "layperson" in roles and roles.count("layperson") >= 2  # its loop ran twice (loopLimit)
    assert not {"clarifier", "redundancy_checker", "selector"} & set(roles)
    all_loops = await roles_of(
        scripted,
        llm_clients,
        tmp_path / "all",
        lambda client: soms.simplify_paragraph(
            PARAGRAPHS[0], Language.MARKDOWN, client, settings().soms_options()
        ),
    )
    assert {"clarifier", "redundancy_checker"} <= set(all_loops)


# -- AgentSimp: without the architect, the metaphor analyst or the terminology interpreter -----------------------


@pytest.mark.parametrize("communication", ["pipeline", "synchronous"])
@pytest.mark.parametrize(
    ("switch", "role"),
    [
        ("architect", "architect"),
        ("metaphorAnalyst", "metaphor_analyst"),
        ("terminologyInterpreter", "terminology_interpreter"),
        ("proofread", "proofreader"),
    ],
)
async def test_agentsimp_ablations_leave_out_one_agent(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    switch: str,
    role: str,
    communication: str,
) -> None:
    def run_with(options: agentsimp.AgentSimpOptions) -> Any:
        async def run(client: Any) -> None:
            rewrites = await agentsimp.simplify_document(PARAGRAPHS, Language.MARKDOWN, client, options)
            assert len(rewrites) == len(PARAGRAPHS) and all(rewrite.text for rewrite in rewrites)

        return run

    whole = settings(simplify={"communication": communication}).agentsimp_options()
    without = settings(simplify={"communication": communication, switch: False}).agentsimp_options()
    assert role in await roles_of(scripted, llm_clients, tmp_path / "whole", run_with(whole))
    roles = await roles_of(scripted, llm_clients, tmp_path / "without", run_with(without))
    assert role not in roles and "simplifier" in roles
