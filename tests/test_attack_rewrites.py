"""A hostile model, or a manuscript that talks a model into it, must not get markup into the user's files.

A rewrite that ADDS what the original never had - `\\immediate\\write18{rm -rf ~}`, `\\input{/etc/passwd}`, an
environment, a link, `<script>`, a raw-output attribute, a `^^` character code, a comment made active - is refused
(paragraph rewrites: nothing is applied, and the message names what was added) or made plain text (the lay
article, a new file). The reproductions run the real pipelines, the real CLI and the real language server against
the scripted OpenAI-compatible endpoint on loopback, with a model that appends the attack to every text it writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from test_lsp_rewrites import (
    CONFIG,
    FIRST_LINE,
    LATEX_TEXT,
    MARKDOWN_TEXT,
    SIMPLIFY_DOCUMENT,
    SIMPLIFY_PARAGRAPH,
    RewriteClient,
    margin_settings,
    prepare,
    vscode,
)

from margin.server.cli import main
from margin.server.cli.exit_status import NOT_REWRITTEN as EXIT_NOT_REWRITTEN
from margin.testing.scripted_agents import rewrite_rules
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule
from margin.workflows.prompts import fenced_after
from margin.workflows.rewrite.additions import (
    BACKSLASH,
    BRACE,
    CHARACTER_CODE,
    COMMAND,
    DEFINITION,
    ENVIRONMENT,
    FILE_ACCESS,
    HTML,
    METADATA,
    added_elements,
    additions,
    neutralize,
)
from margin.workflows.rewrite.agentsimp import AgentSimpOptions, simplify_document
from margin.workflows.rewrite.jrel import LayOptions, write_lay_article_from
from margin.workflows.rewrite.preservation import CITATION, CODE, LINK
from margin.workflows.rewrite.soms import SomsOptions, simplify_paragraph
from margin.workflows.rewrite.transcript import Transcript
from margin.workflows.rewrite.types import Language, RewriteStatus

from conftest import SCRIPTED_MODEL, ClientFactory, ScriptedFactory, feedback_llm_config

LATEX, MARKDOWN = Language.LATEX, Language.MARKDOWN
TEX = (
    r"However, the estimator of \citet{smith2020} keeps the error below $\epsilon < 0.1$ in approximately half "
    r"of the runs~\cite{lee2021}, as \textsc{Nasa} reports. % TODO \input{draft-notes}" + "\n"
    r"See \url{https://example.org/a%20b} and Table~\ref{tab:main}."
)
MD = (
    "However, the gauges of @smith2020 were read approximately once per hour (see [the data]"
    "(https://example.org/data) and `gauge.csv`), with $x_i<0.1$. <!-- TODO \\input{draft-notes} --> Done."
)
PAYLOAD = r" \immediate\write18{rm -rf ~}\input{/etc/passwd}"


def kinds(original: str, rewrite: str, language: Language) -> set[str]:
    return {element.kind for element in added_elements(original, rewrite, language)}


# -- what may and may not be added -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rewrite", "expected"),
    [
        (TEX + r" \immediate\write18{rm -rf ~}", {FILE_ACCESS}),
        (TEX + r" \input{/etc/passwd}", {FILE_ACCESS}),
        (TEX + r" \input /etc/passwd", {FILE_ACCESS}),  # TeX's own syntax, no braces
        (TEX + r" \include{x} \openout3=x \read16 to \x \special{x}", {FILE_ACCESS, COMMAND}),
        (TEX + r" \catcode`\%=12", {DEFINITION}),
        (TEX + r" \def\x{y} \newcommand{\y}{z} \usepackage{shellesc} \makeatletter", {DEFINITION, COMMAND}),
        (TEX + r" \csname input\endcsname{/etc/passwd}", {DEFINITION}),
        (TEX + r" \begin{filecontents}{x.tex}a\end{filecontents}", {ENVIRONMENT}),
        (TEX + r" \begin{comment} hidden \end{comment}", {ENVIRONMENT}),
        (TEX + r" \href{http://evil.example}{here}", {COMMAND, LINK}),  # \href is new, and so is its target
        (TEX + r" \url{http://evil.example}", {LINK}),  # \url is the original's; its target is not
        (TEX + " http://evil.example/x.", {LINK}),
        (TEX + r" ^^5cinput{/etc/passwd}", {CHARACTER_CODE}),  # TeX reads ^^5c as a backslash
        (TEX + r" \foo \textsc", {COMMAND}),
        (TEX + r" \cite{made-up2024}", {CITATION}),
        (TEX + " }", {BRACE}),
        (TEX + " \\", {BACKSLASH}),  # it would pair with whatever follows the paragraph in the file
        (TEX + r" \verb|\input{x}|", {COMMAND, FILE_ACCESS}),  # a new \verb body is read like any text
    ],
)
def test_latex_additions_are_found_by_class(rewrite: str, expected: set[str]) -> None:
    assert kinds(TEX, rewrite, LATEX) == expected


def test_a_command_hidden_in_the_authors_comment_cannot_be_made_active() -> None:
    uncommented = TEX.replace("% TODO ", "")
    assert [str(element) for element in added_elements(TEX, uncommented, LATEX)] == [
        r"file or shell command \input{draft-notes}"
    ]
    markdown = MD.replace("<!-- TODO ", "").replace(" -->", "")
    assert kinds(MD, markdown, MARKDOWN) == {FILE_ACCESS}


def test_a_percent_inside_a_url_does_not_hide_what_follows() -> None:
    # TeX reads the % in \url{...} as part of the address, so \input here is live: never skipped as a comment.
    sneaky = TEX.replace(r"\url{https://example.org/a%20b}", r"\url{https://example.org/a%20b}\input{x}")
    assert kinds(TEX, sneaky, LATEX) == {FILE_ACCESS}


@pytest.mark.parametrize(
    "rewrite",
    [
        TEX,
        TEX.replace("However", r"\emph{But}").replace("approximately", r"\textit{about}")
        + r" \textbf{Done}\ldots",
        TEX.replace(
            r"\textsc{Nasa}", r"\textsc{the space agency}"
        ),  # a text command of the original, new words
        TEX.replace("half", r"50\% \,--\, half") + r" Poincar\'e\@.",  # escapes, spacing, accents
        TEX + r" Again \citet{smith2020} and~\cite{lee2021}.",  # the original's keys, repeated
        TEX + r" \url{https://example.org/a%20b}",  # the original's link, repeated
    ],
)
def test_latex_rewrites_that_only_change_words_add_nothing(rewrite: str) -> None:
    assert added_elements(TEX, rewrite, LATEX) == []


@pytest.mark.parametrize(
    ("rewrite", "expected"),
    [
        (MD + " <script>alert(1)</script>", {HTML}),
        (MD + " <img src=x onerror=alert(1)>", {HTML}),
        (MD + " <iframe\nsrc=//evil.example>", {HTML}),
        (MD + " <!-- hidden -->", {HTML}),
        (MD + " [click](http://evil.example)", {LINK}),
        (MD + " [click](javascript:alert(1))", {LINK}),
        (MD + " ![](http://evil.example/pixel.png)", {LINK}),
        (MD + " ![x](/home/user/.ssh/id_rsa)", {LINK}),
        (MD + " <http://evil.example>", {LINK}),
        (MD + " <javascript:alert(1)>", {LINK}),
        (MD + " www.evil.example", {LINK}),
        (MD + "\n\n[ref]: http://evil.example", {LINK}),
        (MD + r" \input{/etc/passwd}", {FILE_ACCESS}),  # pandoc passes raw TeX on to LaTeX
        (MD + r" $\input{/etc/passwd}$", {FILE_ACCESS}),  # math too
        (MD + " `\\input{x}`{=latex}", {CODE, FILE_ACCESS, "raw-output attribute"}),
        (MD + "\n\n~~~\nrm -rf ~\n~~~", {CODE}),
        (MD + "\n\n---\nheader-includes: x\n---", {METADATA}),
        (MD + " ^^5c", {CHARACTER_CODE}),
        (MD + " @made-up2024", {CITATION}),
    ],
)
def test_markdown_additions_are_found_by_class(rewrite: str, expected: set[str]) -> None:
    assert kinds(MD, rewrite, MARKDOWN) == expected


@pytest.mark.parametrize(
    "rewrite",
    [
        MD,
        MD.replace("However", "*But*").replace("approximately", "**about**"),
        MD + " Also [the same data](https://example.org/data), `gauge.csv` and @smith2020.",
        MD + r" 5 \* 3 \_ \<b> \[not a link\](https://example.org/data)",  # escaped: no markup
    ],
)
def test_markdown_rewrites_that_only_change_words_add_nothing(rewrite: str) -> None:
    assert added_elements(MD, rewrite, MARKDOWN) == []


def test_a_sensitive_command_of_the_original_can_be_kept_but_not_changed_or_repeated() -> None:
    original = r"We load the table with \input{tables/main} here, as before."
    kept = r"We load the table with \input{tables/main} here, as before."
    assert added_elements(original, kept.replace("We load", "We read"), LATEX) == []
    assert kinds(original, original.replace("tables/main", "/etc/passwd"), LATEX) == {FILE_ACCESS}
    assert kinds(original, original + r" \input{tables/main} here, as before.", LATEX) == {FILE_ACCESS}


PATHOLOGICAL = [
    "[",
    "![a](",
    "<!--",
    "<a ",
    "`a",
    "\\x{{",
    "\\verb#",
    "\\url{%",
    "%%\n",
    "~~~~~\n~~~\n",
    "\\write18{",
    "^^",
    "http://a.b/",
    "[a]: ",
]


@pytest.mark.parametrize("unit", PATHOLOGICAL)
@pytest.mark.parametrize("language", [LATEX, MARKDOWN])
def test_the_scans_stay_linear_on_hostile_text(unit: str, language: Language) -> None:
    rewrite = unit * (120_000 // len(unit))
    started = time.perf_counter()
    # keys=False: the new scans alone (made-up keys reuse preservation's extraction, bounded in finalize).
    additions(rewrite[: len(rewrite) // 4], rewrite, language, keys=False)
    # Linear: about a second here; a quadratic scan of 120,000 characters would take minutes.
    assert time.perf_counter() - started < 8


def test_neutralize_makes_every_addition_plain_text_and_keeps_the_words() -> None:
    hostile = (
        MD
        + " <script>alert(1)</script> [click **\\input{x}**](http://evil.example) ![pixel](http://evil/p.png)"
        " <http://evil> www.evil.example `\\input{x}`{=latex} \\write18{x} ^^5c"
    )
    result = neutralize(MD, hostile)
    assert result is not None
    text, changed = result
    assert added_elements(MD, text, MARKDOWN) == []
    assert text.startswith(MD)  # the original's own markup is untouched
    added = text[len(MD) :]
    for gone in ("<script>", "](http://evil", "<http://evil>", "www.evil", "`"):
        assert gone not in added, gone
    assert "&lt;script>" in added and "click **\\\\input{x}**" in added and " pixel " in added
    assert "\\{=latex}" in added and "\\\\write18{x}" in added and "\\^\\^5c" in added
    assert {element.kind for element in changed} >= {HTML, LINK, FILE_ACCESS, CODE, CHARACTER_CODE}
    assert neutralize(MD, text) == (text, [])


# -- through the pipelines: a model that appends the attack to everything it writes -------------------------------


def appending(payload: str) -> Callable[[RecordedRequest], Reply]:
    """The scripted agents' answer with `payload` added to every text it holds (repairs included)."""
    respond = rewrite_rules()[0].respond
    assert respond is not None

    def hostile(request: RecordedRequest) -> Reply:
        reply = respond(request)
        if reply.content is not None and not reply.content.lstrip().startswith("{"):
            return Reply(content=reply.content + payload)  # Markdown answers (the journalist)
        answer = json.loads(reply.text())
        if isinstance(answer.get("text"), str):
            answer["text"] += payload
        if isinstance(answer.get("paragraphs"), list):
            answer["paragraphs"] = [f"{text}{payload}" for text in answer["paragraphs"]]
        return Reply(json=answer)

    return hostile


async def test_soms_refuses_a_rewrite_that_adds_shell_and_file_commands(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(role="simplifier", respond=appending(PAYLOAD)), *rewrite_rules())
    transcript = Transcript("soms")
    llm = llm_clients(feedback_llm_config(endpoint, tmp_path, cache_enabled=False))

    result = await simplify_paragraph(TEX, LATEX, llm, SomsOptions(loop_limit=1), transcript=transcript)

    assert result.status is RewriteStatus.REFUSED
    assert (result.text, result.changed) == (TEX, False)
    assert result.message.startswith("not applied: the rewrite would have added ")
    for named in (r"\immediate\write18{rm -rf ~}", r"\input{/etc/passwd}"):
        assert named in result.message and any(named in added for added in result.added)
    repairs = [call for call in endpoint.calls("simplifier") if "Your rewrite added" in call.prompt]
    assert len(repairs) == 1, "one repair, which the model ignored"
    assert any("would have added" in note for note in transcript.notes)


async def test_a_rewrite_many_times_longer_than_its_paragraph_is_refused_unread(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    # Hostile text sized to stall a slow check: refused on its length before any extraction reads it.
    hostile = "".join(f" ![a{number}](x{number * 7919 % 104_729}" for number in range(4_000))
    endpoint = scripted(Rule(role="simplifier", respond=appending(hostile)), *rewrite_rules())
    llm = llm_clients(feedback_llm_config(endpoint, tmp_path, cache_enabled=False))

    started = time.perf_counter()
    result = await simplify_paragraph(TEX, LATEX, llm, SomsOptions(loop_limit=1))

    assert result.status is RewriteStatus.REFUSED and result.text == TEX
    assert "times as long as the text" in result.message
    assert time.perf_counter() - started < 20


async def test_a_model_that_takes_its_addition_out_when_asked_is_applied(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    addition = r" \textsc{see} \cite{made-up2024}"
    respond = appending(addition)

    def repairs_when_asked(request: RecordedRequest) -> Reply:
        rewrite = fenced_after(request.prompt, "Your rewrite:\n")
        if "Your rewrite added" in request.prompt and rewrite is not None:
            return Reply(json={"text": rewrite.replace(addition, "")})
        return respond(request)

    endpoint = scripted(Rule(role="simplifier", respond=repairs_when_asked), *rewrite_rules())
    llm = llm_clients(feedback_llm_config(endpoint, tmp_path, cache_enabled=False))

    result = await simplify_paragraph(TEX, LATEX, llm, SomsOptions(loop_limit=1))

    (repair,) = [call for call in endpoint.calls("simplifier") if "Your rewrite added" in call.prompt]
    assert r"1 citation (\cite{made-up2024})" in repair.prompt
    assert result.status is RewriteStatus.REWRITTEN
    assert "made-up2024" not in result.text


async def test_agentsimp_refuses_only_the_paragraph_whose_proofreading_added_html(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    hostile = appending(" <script>fetch('//evil.example')</script>")
    plain = rewrite_rules()[0].respond
    assert plain is not None

    def proofreader(request: RecordedRequest) -> Reply:
        reply = json.loads((plain(request)).text())
        if "paragraphs" in reply:  # only the first paragraph of each window gets the script
            reply["paragraphs"][0] += " <script>fetch('//evil.example')</script>"
            return Reply(json=reply)
        return hostile(request)

    sources = [MD, "Additionally, the second paragraph is very long and therefore hard to read for anyone."]
    endpoint = scripted(Rule(role="proofreader", respond=proofreader), *rewrite_rules())
    llm = llm_clients(feedback_llm_config(endpoint, tmp_path, cache_enabled=False))

    first, second = await simplify_document(sources, MARKDOWN, llm, AgentSimpOptions())

    assert first.status is RewriteStatus.REFUSED and first.text == MD
    assert "<script>" in first.message and "HTML tag" in first.message
    assert second.status is RewriteStatus.REWRITTEN and "<script>" not in second.text


async def test_the_lay_article_gets_the_journalists_links_html_and_tex_as_plain_text(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    payload = (
        "\n\nRead more [here](http://evil.example) <script>alert(1)</script> \\input{/etc/passwd} "
        "![t](http://evil.example/t.png)"
    )
    endpoint = scripted(Rule(role="journalist", respond=appending(payload)), *rewrite_rules())
    llm = llm_clients(feedback_llm_config(endpoint, tmp_path, cache_enabled=False))
    paper = "Screening randomized controlled trial reports is slow and costly for the reviewers who do it."

    article = await write_lay_article_from("A title", paper, llm, LayOptions(iterations=1))

    assert article.ok
    for version in article.versions:
        assert added_elements(paper, version.article, MARKDOWN) == []
        assert "Read more here" in version.article and "&lt;script>" in version.article
        assert "\\\\input{/etc/passwd}" in version.article  # shown as text, never run by pandoc
    assert len(article.warnings) == 2  # the first draft and the revision
    assert "the first draft added" in article.warnings[0] and "http://evil.example" in article.warnings[0]
    assert "<script>" in article.warnings[0] and "made plain text" in article.warnings[0]


# -- the user's side: the CLI and the editor -----------------------------------------------------------------------


def test_margin_simplify_prints_what_was_refused_and_writes_nothing(
    scripted: ScriptedFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    paper = tmp_path / "paper.tex"
    paper.write_text(LATEX_TEXT, encoding="utf-8")
    endpoint = scripted(Rule(role="simplifier", respond=appending(PAYLOAD)), *rewrite_rules())
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "margin": {
                    "cache": {"path": str(tmp_path / "cache.sqlite3")},
                    "llm": {"retries": 0, "timeoutSeconds": 5, "model": SCRIPTED_MODEL},
                }
            }
        ),
        encoding="utf-8",
    )
    output = tmp_path / "out.tex"

    code = main(
        [
            "simplify", str(paper), "--paragraph", "1", "--method", "soms", "-o", str(output),
            "--endpoint", endpoint.base_url, "--settings", str(settings),
        ]
    )  # fmt: skip

    captured = capsys.readouterr()
    assert code == EXIT_NOT_REWRITTEN
    assert "refused: not applied: the rewrite would have added" in captured.err
    assert r"\input{/etc/passwd}" in captured.err and r"\write18{rm -rf ~}" in captured.err
    assert not output.exists() and paper.read_text(encoding="utf-8") == LATEX_TEXT


@pytest_lsp.fixture(config=CONFIG)
async def editor(lsp_client: RewriteClient, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[None]:
    """A VS Code-like editor on margin's language server (the client of tests/test_lsp_rewrites.py)."""
    root = tmp_path_factory.mktemp("attack-root")
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=vscode(),
            initialization_options={
                "margin": margin_settings(root, "http://127.0.0.1:9/v1"),
                "enforcesSettingScopes": True,  # as VS Code: the test's folder names its own endpoint
            },
            root_uri=root.as_uri(),
        )
    )
    yield
    await lsp_client.shutdown_session()


async def test_the_simplify_paragraph_action_never_applies_an_added_write18_or_input(
    editor: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(editor, scripted, tmp_path, Rule(role="simplifier", respond=appending(PAYLOAD)))
    uri = corner.uri("paper.tex")
    editor.open(uri, LATEX_TEXT)

    outcome = await editor.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0)

    assert outcome["status"] == "refused" and outcome["refused"] == 1, outcome
    assert corner.edits == [] and editor.texts[uri] == LATEX_TEXT
    (told,) = corner.messages
    assert told.type == types.MessageType.Warning
    assert "the simplification was not applied: the rewrite would have added" in told.message
    assert r"\input{/etc/passwd}" in told.message and r"\write18{rm -rf ~}" in told.message


async def test_the_simplify_document_action_applies_clean_paragraphs_and_names_the_refused_link(
    editor: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    plain = rewrite_rules()[0].respond
    assert plain is not None

    def linking(text: str) -> str:
        return text + (" [more](http://evil.example)" if "gauges" in text else "")

    def proofreader(request: RecordedRequest) -> Reply:  # the first paragraph gets a link, its repair too
        reply = json.loads(plain(request).text())
        if "paragraphs" in reply:
            reply["paragraphs"] = [linking(text) for text in reply["paragraphs"]]
        if "text" in reply:
            reply["text"] = linking(reply["text"])
        return Reply(json=reply)

    corner = prepare(editor, scripted, tmp_path, Rule(role="proofreader", respond=proofreader))
    uri = corner.uri("paper.md")
    editor.open(uri, MARKDOWN_TEXT)

    outcome = await editor.execute(SIMPLIFY_DOCUMENT, uri)

    assert outcome["status"] == "applied" and outcome["refused"] == 1 and outcome["rewritten"] == 2, outcome
    assert "http://evil.example" not in editor.texts[uri]
    assert "gauges of @smith2020 were read approximately" in editor.texts[uri]  # the refused one, as it was
    told = [message.message for message in corner.messages]
    assert any("kept as they were" in message and "http://evil.example" in message for message in told), told
