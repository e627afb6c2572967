"""JRE-L lay articles (jrel.write_lay_article) driven through a real scripted OpenAI-compatible server on loopback
with the real LLMClient: the journalist's first draft, then reader notes -> editor advice -> journalist revision
per iteration, the reader routed to its own model, which version is kept, the article found in the journalist's
Markdown, the rendered file's provenance header, and what failures lead to.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from margin.testing.scripted_agents import rewrite_rules
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint
from margin.workflows import readability
from margin.workflows.llm.config import RoleRoute
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.prompts import fence
from margin.workflows.rewrite.jrel import (
    LAST,
    MOST_READABLE,
    LayArticle,
    LayOptions,
    article_of,
    render_article,
    write_lay_article,
)
from margin.workflows.rewrite.transcript import Transcript

from conftest import (
    ClientFactory,
    ScriptedFactory,
    chat_requests_in_order,
    feedback_llm_config,
    final_user_message,
    llm_config,
)

TITLE = "SpaRe: Why Naïve Sparsity Falls Short for Retrieving Clinical Trial Reports"
EASY = "We made a tool. It finds trial reports. It is fast. It saves time."
MEDIUM = "Researchers built a search tool that finds clinical trial reports quickly and saves reviewers time."
HARD = (
    "Notwithstanding considerable methodological heterogeneity, the investigators substantiated that "
    "section-specific vocabulary allocation substantially ameliorates retrieval effectiveness."
)
READER_NOTES = "## Extraction\n1. index: in the first sentence\n\n## Explanation\n1. index: a list that helps find things"
EDITOR_ADVICE = (
    "## Evaluation of the reader's notes\n- Content accuracy: good\n\n## Advice\n1. Explain the main term.\n"
    "2. Use shorter sentences."
)


class Newsroom:
    """One JRE-L run on a scripted endpoint, and what it recorded."""

    def __init__(self, scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path) -> None:
        self.scripted = scripted
        self.llm_clients = llm_clients
        self.tmp_path = tmp_path
        self.endpoint: ScriptedEndpoint | None = None
        self.steps: list[str] = []
        self.transcript = Transcript("jrel")

    async def run(
        self,
        manuscript: Manuscript,
        *rules: Rule,
        base_url: str | None = None,
        roles: dict[str, RoleRoute] | None = None,
        **options: Any,
    ) -> LayArticle:
        self.endpoint = self.scripted(*rules, *rewrite_rules())
        if base_url is None:
            config = feedback_llm_config(self.endpoint, self.tmp_path, cache_enabled=False, roles=roles)
        else:
            config = llm_config(
                base_url,
                self.tmp_path / "cache.sqlite3",
                retries=0,
                cache_enabled=False,
                model="scripted-model",
            )
        return await write_lay_article(
            manuscript,
            self.llm_clients(config),
            LayOptions(**options),
            transcript=self.transcript,
            on_step=self.steps.append,
        )

    def requests(self, role: str | None = None) -> list[RecordedRequest]:
        assert self.endpoint is not None
        return [r for r in chat_requests_in_order(self.endpoint) if role is None or r.role == role]

    def roles(self) -> list[str | None]:
        return [request.role for request in self.requests()]


@pytest.fixture
def newsroom(scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path) -> Newsroom:
    return Newsroom(scripted, llm_clients, tmp_path)


def journalist_writing(
    *articles: str, revision_format: str = "## Improvement\n{advice}\n\n## Revised Article\n{article}"
) -> Rule:
    """A journalist whose first draft is articles[0] and whose n-th revision is articles[n]."""
    calls = itertools.count()

    def respond(request: RecordedRequest) -> Reply:
        number = next(calls)
        article = articles[min(number, len(articles) - 1)]
        if number == 0:
            return Reply(content=f"## Article\n{article}")
        return Reply(content=revision_format.format(advice="Use shorter sentences.", article=article))

    return Rule(role="journalist", respond=respond)


def failing_on_call(number: int, reply: Reply) -> Callable[[RecordedRequest], Reply]:
    """A responder that answers like the scripted agent except on its `number`-th call."""
    calls = itertools.count(1)
    scripted = rewrite_rules()[0]

    def respond(request: RecordedRequest) -> Reply:
        return reply if next(calls) == number else scripted.next_reply(request)

    return respond


# -- the protocol --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("iterations", [0, 1, 3])
async def test_first_draft_then_reader_editor_journalist_per_iteration(
    newsroom: Newsroom, paper: Manuscript, iterations: int
) -> None:
    article = await newsroom.run(paper, iterations=iterations)

    assert newsroom.roles() == ["journalist", *(["reader", "editor", "journalist"] * iterations)]
    assert [version.iteration for version in article.versions] == list(range(iterations + 1))
    assert article.ok and article.chosen == iterations and article.keep == LAST
    assert article.text == article.versions[-1].article
    assert article.failures == []


async def test_the_journalist_reads_the_title_and_the_abstract_first(
    newsroom: Newsroom, paper: Manuscript
) -> None:
    article = await newsroom.run(paper, iterations=1)

    first = final_user_message(newsroom.requests("journalist")[0])
    assert first.startswith(
        f"The paper:\n```\n# {TITLE}\n\n## Abstract\n\nScreening randomized controlled trial reports"
    )
    assert first.endswith("Write the article.")
    assert len(first.split()) < 1_700, "the paper is cut to about paper_words"
    assert article.title == TITLE


async def test_each_agent_gets_the_previous_version_and_the_previous_agents_answer(
    newsroom: Newsroom, paper: Manuscript
) -> None:
    article = await newsroom.run(paper, journalist_writing(HARD, MEDIUM, EASY), iterations=2)

    readers, editors = newsroom.requests("reader"), newsroom.requests("editor")
    revisions = newsroom.requests("journalist")[1:]
    for index, previous in enumerate([HARD, MEDIUM]):
        assert final_user_message(readers[index]) == f"The article:\n{fence(previous)}\n\nTake your notes."
        editor = final_user_message(editors[index])
        assert (
            f"The popular science article:\n{fence(previous)}\n\nThe reader's notes:\n{fence(READER_NOTES)}\n"
            in editor
        )
        assert editor.startswith(f"The paper:\n```\n# {TITLE}\n")
        revision = final_user_message(revisions[index])
        assert (
            f"Your article:\n{fence(previous)}\n\nThe editor's advice:\n{fence(EDITOR_ADVICE)}\n" in revision
        )
    assert [version.article for version in article.versions] == [HARD, MEDIUM, EASY]
    assert [version.notes for version in article.versions] == ["", READER_NOTES, READER_NOTES]
    assert [version.advice for version in article.versions] == ["", EDITOR_ADVICE, EDITOR_ADVICE]


async def test_readability_is_scored_for_every_version(newsroom: Newsroom, paper: Manuscript) -> None:
    article = await newsroom.run(paper, journalist_writing(HARD, MEDIUM, EASY), iterations=2)

    for version in article.versions:
        assert version.scores == readability.score(version.article)
        assert version.difficulty == pytest.approx(
            (version.scores.fkgl + version.scores.cli + version.scores.dcrs) / 3
        )
    difficulties = [version.difficulty for version in article.versions]
    assert difficulties == sorted(difficulties, reverse=True), "HARD, MEDIUM, EASY get easier"


# -- the reader's own model -----------------------------------------------------------------------------------------


async def test_the_reader_can_be_routed_to_its_own_model(newsroom: Newsroom, paper: Manuscript) -> None:
    article = await newsroom.run(paper, iterations=2, roles={"reader": RoleRoute(model="small-model")})

    models = {(request.role, request.body["model"]) for request in newsroom.requests()}
    assert models == {
        ("journalist", "scripted-model"),
        ("editor", "scripted-model"),
        ("reader", "small-model"),
    }
    assert article.models == {
        "journalist": "scripted-model",
        "reader": "small-model",
        "editor": "scripted-model",
    }
    header = render_article(article, "main.tex")
    assert 'reader: "small-model"' in header and 'journalist: "scripted-model"' in header


# -- which version is kept -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("keep", "kept_article"), [(LAST, MEDIUM), (MOST_READABLE, EASY)])
async def test_keep_last_or_most_readable(
    newsroom: Newsroom, paper: Manuscript, keep: str, kept_article: str
) -> None:
    article = await newsroom.run(paper, journalist_writing(HARD, EASY, HARD, MEDIUM), iterations=3, keep=keep)

    assert [version.article for version in article.versions] == [HARD, EASY, HARD, MEDIUM]
    easiest = min(range(4), key=lambda index: article.versions[index].difficulty)
    assert easiest == 1, "the script makes iteration 1 the most readable"
    assert article.text == kept_article
    assert article.chosen == (easiest if keep == MOST_READABLE else 3)


# -- the article in the journalist's Markdown ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("## Article\nThe body.\n", "The body."),
        (
            "## Improvement\nShorter.\n\n## Revised Article\nThe body.\n\nSecond paragraph.",
            "The body.\n\nSecond paragraph.",
        ),
        ("### revised article:\nThe body.", "The body."),
        ("**Article**\nThe body.", "The body."),
        ("# Revised Article\nThe body.\n\n## Notes\nFor the editor.", "The body."),
        ("The body, from a weak model without headings.", "The body, from a weak model without headings."),
        ("## Improvement\nOnly advice, no article.", ""),
    ],
)
def test_article_of_finds_the_article_under_its_heading(answer: str, expected: str) -> None:
    assert article_of(answer) == expected


def test_article_of_understands_bold_headings_with_a_colon() -> None:
    answer = "**Improvement:**\nUse shorter sentences.\n\n**Revised Article:**\nThe body."
    assert article_of(answer) == "The body."


async def test_the_revision_keeps_only_the_revised_article(newsroom: Newsroom, paper: Manuscript) -> None:
    article = await newsroom.run(paper, journalist_writing(HARD, EASY), iterations=1)

    assert article.text == EASY
    assert "Improvement" not in article.text and "shorter sentences" not in article.text


# -- the rendered article ------------------------------------------------------------------------------------------


def front_matter(text: str) -> tuple[str, str]:
    found = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert found is not None, text[:300]
    return found.group(1), text[found.end() :]


async def test_render_article_header_has_the_numbers_of_every_version(
    newsroom: Newsroom, paper: Manuscript
) -> None:
    article = await newsroom.run(
        paper, journalist_writing(HARD, EASY, MEDIUM), iterations=2, keep=MOST_READABLE
    )
    rendered = render_article(article, "main.tex")

    header, body = front_matter(rendered)
    assert re.search(r"^iterations: 2$", header, re.M)
    assert re.search(r"^kept: 1 +# the most readable version$", header, re.M)
    rows = re.findall(
        r"^  - \{iteration: (\d+), fkgl: ([\d.-]+), cli: ([\d.-]+), dcrs: ([\d.-]+), mean: ([\d.-]+)\}$",
        header,
        re.M,
    )
    assert [int(row[0]) for row in rows] == [0, 1, 2]
    for row, version in zip(rows, article.versions, strict=True):
        assert [float(value) for value in row[1:]] == pytest.approx(
            [version.scores.fkgl, version.scores.cli, version.scores.dcrs, version.difficulty], abs=0.006
        )
    assert body == f"\n# {TITLE}\n\n{EASY}\n"


async def test_render_article_header_parses_as_yaml_with_the_right_numbers(
    newsroom: Newsroom, paper: Manuscript
) -> None:
    article = await newsroom.run(
        paper,
        journalist_writing(HARD, EASY, MEDIUM),
        iterations=2,
        roles={"reader": RoleRoute(model="small-model")},
    )
    header, _ = front_matter(render_article(article, "paper/main.tex"))

    data = yaml.safe_load(header)
    assert data["title"] == TITLE
    assert data["source"] == "paper/main.tex"
    assert data["models"] == {
        "journalist": "scripted-model",
        "reader": "small-model",
        "editor": "scripted-model",
    }
    assert data["iterations"] == 2 and data["kept"] == 2
    assert "JRE-L" in data["generator"]
    assert [row["iteration"] for row in data["readability"]] == [0, 1, 2]
    assert [row["fkgl"] for row in data["readability"]] == pytest.approx(
        [version.scores.fkgl for version in article.versions], abs=0.006
    )


# -- failures ------------------------------------------------------------------------------------------------------


async def test_a_failed_reader_ends_the_iterations_and_keeps_the_versions_so_far(
    newsroom: Newsroom, paper: Manuscript
) -> None:
    reader = Rule(role="reader", respond=failing_on_call(2, Reply(status=500, error_message="overloaded")))
    article = await newsroom.run(paper, reader, iterations=3)

    assert newsroom.roles() == ["journalist", "reader", "editor", "journalist", "reader"]
    assert [version.iteration for version in article.versions] == [0, 1]
    assert article.ok and article.chosen == 1
    assert article.failures and "reader: server_error" in article.failures[0]
    assert any(note.startswith("iteration 2 stopped") for note in newsroom.transcript.notes)
    assert newsroom.steps[-1] == "Reader taking notes, iteration 2/3"


async def test_a_failed_revision_keeps_the_most_readable_version_so_far(
    newsroom: Newsroom, paper: Manuscript
) -> None:
    journalist = journalist_writing(HARD, EASY, MEDIUM)
    calls = itertools.count()
    assert journalist.respond is not None
    answer = journalist.respond

    def failing_third(request: RecordedRequest) -> Reply:
        return Reply(status=500) if next(calls) == 2 else answer(request)

    article = await newsroom.run(
        paper, Rule(role="journalist", respond=failing_third), iterations=3, keep=MOST_READABLE
    )

    assert [version.article for version in article.versions] == [HARD, EASY]
    assert article.text == EASY


async def test_a_revision_without_an_article_ends_the_iterations(
    newsroom: Newsroom, paper: Manuscript
) -> None:
    journalist = journalist_writing(HARD, EASY, "", revision_format="## Improvement\n{advice}{article}")
    article = await newsroom.run(paper, journalist, iterations=3)

    assert [version.article for version in article.versions] == [HARD]
    assert article.ok and article.text == HARD
    assert any("the revision held no article" in note for note in newsroom.transcript.notes)


@pytest.mark.parametrize(
    ("reply", "failure"),
    [
        (Reply(status=500, error_message="overloaded"), "journalist: server_error: HTTP 500: overloaded"),
        (Reply(content="## Improvement\nNothing to write."), "the journalist's answer held no article"),
        (Reply(content=""), "journalist: empty"),
    ],
)
async def test_no_first_draft_means_not_ok_with_a_failure_message(
    newsroom: Newsroom, paper: Manuscript, reply: Reply, failure: str
) -> None:
    article = await newsroom.run(paper, Rule(role="journalist", replies=[reply]), iterations=3)

    assert not article.ok and article.text == "" and article.versions == []
    assert any(item.startswith(failure) for item in article.failures), article.failures
    assert newsroom.roles() == ["journalist"]


async def test_a_dead_endpoint_gives_no_article_and_says_why(
    newsroom: Newsroom, paper: Manuscript, dead_url: str
) -> None:
    article = await newsroom.run(paper, base_url=dead_url)

    assert not article.ok
    assert any("unavailable" in failure for failure in article.failures)


# -- progress and transcript ----------------------------------------------------------------------------------------


async def test_progress_steps_name_the_agent_and_the_iteration(newsroom: Newsroom, paper: Manuscript) -> None:
    await newsroom.run(paper, iterations=3)

    assert newsroom.steps == [
        "Journalist writing the first draft",
        *(
            step
            for iteration in range(1, 4)
            for step in (
                f"Reader taking notes, iteration {iteration}/3",
                f"Editor advising the journalist, iteration {iteration}/3",
                f"Journalist revising, iteration {iteration}/3",
            )
        ),
    ]


async def test_the_transcript_records_every_turn(newsroom: Newsroom, paper: Manuscript) -> None:
    editor = Rule(role="editor", respond=failing_on_call(2, Reply(status=500)))
    await newsroom.run(paper, editor, iterations=3)

    requests = newsroom.requests()
    turns = newsroom.transcript.turns
    assert [turn.role for turn in turns] == [request.role for request in requests]
    for turn, request in zip(turns, requests, strict=True):
        assert turn.messages == request.body["messages"]
    assert [turn.role for turn in turns if turn.failure] == ["editor"]
    assert turns[1].output == READER_NOTES
