"""Degenerate repetition: detected in any answer, asked again once with repetition penalties, then removed from
plain text (and said) or refused for JSON, on a real scripted endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from margin.testing.scripted_endpoint import Reply, Rule
from margin.workflows.llm.repetition import collapse, repetition
from margin.workflows.llm.types import FailureKind, LLMError, Request
from margin.workflows.rewrite import jrel

from conftest import PAPER_MAIN, ClientFactory, ScriptedFactory, feedback_llm_config, load_manuscript

PARAGRAPH = (
    "The new test finds malaria parasites in a drop of blood within minutes, using a paper strip and a phone."
)
LOOPED = "\n\n".join([PARAGRAPH] * 16)
GOOD = "A paper strip and a phone can now find malaria in minutes.\n\nNurses in remote clinics can use it."


def ask(schema: dict[str, object] | None = None) -> Request:
    return Request(
        role="journalist", messages=({"role": "user", "content": "Write the article."},), schema=schema
    )


def test_prose_is_not_degenerate_and_loops_are() -> None:
    prose = (
        "We measured recall on five collections. Recall rose on four of them. On the fifth it fell slightly, "
        "because its criteria are short. We discuss why in Section 5, and what it means for screening."
    )
    assert repetition(prose) is None
    assert "a paragraph appears 16 times" in (repetition(LOOPED) or "")
    sentence_loop = " ".join(["The prior is shared across all reviews in a collection."] * 3)
    assert "a sentence appears 3 times" in (repetition(sentence_loop) or "")
    assert collapse(LOOPED) == PARAGRAPH
    assert collapse(f"Intro.\n\n{sentence_loop}\n\nEnd here.") == (
        "Intro.\n\nThe prior is shared across all reviews in a collection.\n\nEnd here."
    )


async def test_a_looping_answer_is_asked_again_with_repetition_penalties(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(content=LOOPED), Reply(content=GOOD)]))
    client = llm_clients(feedback_llm_config(endpoint, tmp_path))
    completion = await client.complete(ask())
    assert completion.text == GOOD and completion.repetition == ""
    first, second = endpoint.calls()
    assert "frequency_penalty" not in first.body
    assert second.body["frequency_penalty"] > 0 and second.body["presence_penalty"] > 0
    assert client.usage.repetition_retries == 1


async def test_plain_text_that_still_loops_keeps_each_passage_once_and_says_so(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(content=LOOPED)]))
    client = llm_clients(feedback_llm_config(endpoint, tmp_path))
    completion = await client.complete(ask())
    assert completion.text == PARAGRAPH
    assert "appears 16 times" in completion.repetition
    assert len(endpoint.calls()) == 2


async def test_json_that_still_loops_is_a_typed_failure(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    endpoint = scripted(Rule(replies=[Reply(json={"text": LOOPED})]))
    client = llm_clients(feedback_llm_config(endpoint, tmp_path))
    with pytest.raises(LLMError) as raised:
        await client.complete(ask(schema))
    assert raised.value.kind is FailureKind.INVALID_OUTPUT and "repeats itself" in str(raised.value)


async def test_a_lay_article_that_loops_is_trimmed_and_the_user_is_told(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(role="journalist", replies=[Reply(content=LOOPED)]))
    client = llm_clients(feedback_llm_config(endpoint, tmp_path, cache_enabled=False))
    article = await jrel.write_lay_article(load_manuscript(PAPER_MAIN), client, jrel.LayOptions(iterations=0))
    assert article.ok and article.text.count(PARAGRAPH[:40]) == 1
    assert article.warnings and "repeated itself" in article.warnings[0]
