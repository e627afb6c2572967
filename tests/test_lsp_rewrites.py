"""Rewrites through the language server, end to end: "Simplify paragraph", "Simplify document" and "Generate lay
article" picked as code actions and run as commands on margin's server over stdio (pytest-lsp), every model call
answered by a real scripted OpenAI-compatible endpoint on loopback (`rewrite_rules()`, whose simplifier swaps
formal words such as "however" or "approximately" for plain ones and keeps all markup).

Most tests share one VS Code-profile server; each test has its own folder (tmp_path) whose settings, answered
through workspace/configuration, name the test's own endpoint and cache, so no test sees another's documents,
answers or cached calls. The client applies the workspace edits it is sent (checking their document version) and
reports the new text back with didChange, as an editor does. Synchronisation is by polling client and endpoint
state or waiting for responses, never by sleeping for a fixed time before asserting.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
import yaml
from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

from margin.testing.scripted_agents import plainer, rewrite_rules
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint

from conftest import (
    FIXTURES,
    LSP_WAIT,
    SCRIPTED_MODEL,
    SERVER_COMMAND,
    RecordingClient,
    ScriptedFactory,
    eventually,
    fix_code_action_hook,
    recording_client,
    stop_session,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = LSP_WAIT  # seconds; only turns a hang into a failure
SHORT_WAIT = 4.0  # for waits that a known bug turns into a timeout (xfail tests)

SIMPLIFY_PARAGRAPH = "margin.simplifyParagraph"
SIMPLIFY_DOCUMENT = "margin.simplifyDocument"
LAY_ARTICLE = "margin.generateLayArticle"

# -- documents ---------------------------------------------------------------------------------------------------

# A single-file LaTeX paper. The first paragraph (lines 5-6) has three formal words the scripted simplifier
# replaces, a \citet, a \cite and a math span that must survive; the second (lines 8-9) has others.
LATEX_LINES = [
    r"\documentclass{article}",  # 0
    r"\begin{document}",  # 1
    r"\section{Method}",  # 2
    r"\label{sec:method}",  # 3
    "",  # 4
    r"However, the estimator of \citet{smith2020} keeps the error below $\epsilon < 0.1$ in",  # 5
    r"approximately half of the runs~\cite{lee2021}, which we therefore consider sufficient.",  # 6
    "",  # 7
    r"Numerous stations were visited, and the values in Table~\ref{tab:main} demonstrate that the",  # 8
    r"gain holds across all forty sites~\cite{garcia2019}; additionally, no site was dropped.",  # 9
    "",  # 10
    r"\end{document}",  # 11
    "",
]
LATEX_TEXT = "\n".join(LATEX_LINES)
FIRST_PARAGRAPH = "\n".join(LATEX_LINES[5:7])
SECOND_PARAGRAPH = "\n".join(LATEX_LINES[8:10])
FIRST_LINE, SECOND_LINE = 5, 8
FIRST_PROTECTED = (r"\citet{smith2020}", r"$\epsilon < 0.1$", r"~\cite{lee2021}")
DROPPED_CITATION = r"\cite{lee2021}"

# A Markdown paper for "Simplify document": three paragraphs long enough to be simplified, each with formal
# words; a short one, headings, front matter and a region marked off that must stay byte for byte. Characters
# outside the BMP (two UTF-16 code units each) test that edit ranges count as LSP does.
MARKDOWN_LINES = [
    "---",  # 0
    'title: "A small gauge study"',  # 1
    "---",  # 2
    "",  # 3
    "# Method",  # 4
    "",  # 5
    "However, the gauges of @smith2020 were read approximately once per hour, and the",  # 6
    "readings were therefore noisy [@lee2021, p. 4].",  # 7
    "",  # 8
    "Numerous stations \U0001f30a were visited in order to check the model; additionally, the",  # 9
    "values $x_i < 0.1$ demonstrate the effect (see [the data](https://example.org/data)).",  # 10
    "",  # 11
    "Short one here.",  # 12
    "",  # 13
    "## Results",  # 14
    "",  # 15
    "The error fell substantially, and consequently the surrogate was used for every",  # 16
    "scenario of the board \U0001d6fc test, however large.",  # 17
    "",  # 18
    "<!-- margin: off -->",  # 19
    "However, this scratch paragraph is off limits and must never be rewritten by anyone at all.",  # 20
    "<!-- margin: on -->",  # 21
    "",
]
MARKDOWN_TEXT = "\n".join(MARKDOWN_LINES)
MARKDOWN_PARAGRAPH_LINES = [(6, 7), (9, 10), (16, 17)]
MARKDOWN_PROTECTED = [
    ("@smith2020", "[@lee2021, p. 4]"),
    ("$x_i < 0.1$", "[the data](https://example.org/data)"),
    (),
]


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def paragraph_range(lines: Sequence[str], first: int, last: int) -> types.Range:
    """The LSP range of whole lines first..last (the last one without its line break)."""
    return types.Range(
        start=types.Position(line=first, character=0),
        end=types.Position(line=last, character=utf16_length(lines[last])),
    )


def offset_of(text: str, position: types.Position) -> int:
    """The string offset of an LSP position (lines end at \\n, \\r\\n or \\r; characters are UTF-16 units)."""
    line_starts = [0]
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\r" and text[index + 1 : index + 2] == "\n":
            index += 1
        if char in "\r\n":
            line_starts.append(index + 1)
        index += 1
    assert position.line < len(line_starts), position
    offset = line_starts[position.line]
    units = 0
    while units < position.character:
        assert offset < len(text) and text[offset] not in "\r\n", f"{position} is past its line's end"
        units += utf16_length(text[offset])
        offset += 1
    assert units == position.character, f"{position} splits a surrogate pair"
    return offset


def apply_text_edits(text: str, edits: Sequence[types.TextEdit]) -> str:
    spans = sorted(
        (offset_of(text, edit.range.start), offset_of(text, edit.range.end), edit.new_text) for edit in edits
    )
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        assert end <= start, "overlapping edits"
    for start, end, new_text in reversed(spans):
        text = text[:start] + new_text + text[end:]
    return text


# -- the client --------------------------------------------------------------------------------------------------


class RewriteClient(RecordingClient):
    """conftest's RecordingClient (pytest-lsp's client, which records showMessage, showDocument and progress)
    as an editor: it keeps the text of the documents it opened, applies workspace/applyEdit when the edit's
    version is the document's current one, and reports every change with didChange."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.edit_requests: list[types.ApplyWorkspaceEditParams] = []
        self.accept_edits = True

    def open(self, uri: str, text: str, version: int = 1, language_id: str | None = None) -> None:
        self.texts[uri], self.versions[uri] = text, version
        super().open(uri, text, version, language_id)

    def replace_text(self, uri: str, text: str) -> None:
        """The user (or an applied edit) changed the whole document: a new version, sent with didChange."""
        self.texts[uri], self.versions[uri] = text, self.versions[uri] + 1
        self.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.edit_requests.append(params)
        if not self.accept_edits:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="the user said no")
        changes: list[tuple[str, int | None, Sequence[types.TextEdit]]] = []
        for change in params.edit.document_changes or []:
            assert isinstance(change, types.TextDocumentEdit), change
            edits = [edit for edit in change.edits if isinstance(edit, types.TextEdit)]
            changes.append((change.text_document.uri, change.text_document.version, edits))
        for uri, edits in (params.edit.changes or {}).items():
            changes.append((uri, None, edits))
        for uri, version, _ in changes:
            if uri not in self.texts or (version is not None and version != self.versions[uri]):
                return types.ApplyWorkspaceEditResult(
                    applied=False, failure_reason=f"{uri} is not at {version}"
                )
        for uri, _, edits in changes:
            self.replace_text(uri, apply_text_edits(self.texts[uri], edits))
        return types.ApplyWorkspaceEditResult(applied=True)

    # -- requests ------------------------------------------------------------------------------------------------

    async def execute(self, command: str, *arguments: Any, timeout: float = WAIT) -> dict[str, Any]:
        result = await asyncio.wait_for(
            self.workspace_execute_command_async(
                types.ExecuteCommandParams(command=command, arguments=list(arguments))
            ),
            timeout,
        )
        assert isinstance(result, dict), result
        return result

    async def code_actions(
        self, uri: str, line: int, character: int, only: Sequence[str] | None = None
    ) -> list[types.CodeAction]:
        fix_code_action_hook(self)
        position = types.Position(line=line, character=character)
        answer = await asyncio.wait_for(
            self.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=types.Range(start=position, end=position),
                    context=types.CodeActionContext(
                        diagnostics=[],
                        only=[types.CodeActionKind(kind) for kind in only] if only is not None else None,
                    ),
                )
            ),
            WAIT,
        )
        return [action for action in answer or [] if isinstance(action, types.CodeAction)]

    def cancel_progress(self, token: types.ProgressToken) -> None:
        self.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))


def apply_edit(
    client: RewriteClient, params: types.ApplyWorkspaceEditParams
) -> types.ApplyWorkspaceEditResult:
    return client.apply(params)


def make_client() -> RewriteClient:
    return recording_client(RewriteClient, (), {types.WORKSPACE_APPLY_EDIT: apply_edit})


CONFIG = ClientServerConfig(server_command=SERVER_COMMAND, client_factory=make_client)


def margin_settings(folder: Path, endpoint_url: str, **extra: Any) -> dict[str, Any]:
    """Complete settings for a test's folder: its endpoint (the model named: no GET /models), a private cache,
    no retries, and reviews only on request (opening a document must cost no model call)."""
    settings: dict[str, Any] = {
        "llm": {"endpoint": endpoint_url, "model": SCRIPTED_MODEL, "retries": 0, "timeoutSeconds": 30},
        "cache": {"path": str(folder / "cache.sqlite3")},
        "review": {"trigger": "manual"},
    }
    for dotted, value in extra.items():
        section, _, key = dotted.partition("_")
        settings.setdefault(section, {})[key] = value
    return settings


def vscode() -> types.ClientCapabilities:
    return client_capabilities("visual-studio-code")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def shared(lsp_client: RewriteClient, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[None]:
    """The server most tests share: VS Code's capabilities, a root of its own (tests add workspace folders)."""
    root = tmp_path_factory.mktemp("shared-root")
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=vscode(),
            initialization_options={
                "margin": margin_settings(root, "http://127.0.0.1:9/v1"),
                "enforcesSettingScopes": True,  # as VS Code: folders get their own endpoints below
            },
            root_uri=root.as_uri(),
        )
    )
    yield
    await lsp_client.shutdown_session()


# -- a test's own corner of the shared server ----------------------------------------------------------------------


@dataclass
class Corner:
    """One test's folder, endpoint and the slice of what the client received since the test began."""

    client: RewriteClient
    endpoint: ScriptedEndpoint
    folder: Path
    tokens_before: frozenset[types.ProgressToken]
    messages_before: int
    edits_before: int
    shown_before: int

    def uri(self, name: str) -> str:
        return (self.folder / name).as_uri()

    @property
    def edits(self) -> list[types.ApplyWorkspaceEditParams]:
        return self.client.edit_requests[self.edits_before :]

    @property
    def messages(self) -> list[types.ShowMessageParams]:
        return self.client.messages[self.messages_before :]

    @property
    def shown(self) -> list[types.ShowDocumentParams]:
        return self.client.shown_documents[self.shown_before :]

    @property
    def tokens(self) -> list[types.ProgressToken]:
        return [token for token in self.client.progress_reports if token not in self.tokens_before]

    def progress(self, token: types.ProgressToken) -> list[Any]:
        return list(self.client.progress_reports.get(token, []))

    def ended(self, token: types.ProgressToken) -> bool:
        return any(isinstance(value, types.WorkDoneProgressEnd) for value in self.progress(token))

    def began(self, token: types.ProgressToken) -> bool:
        return any(isinstance(value, types.WorkDoneProgressBegin) for value in self.progress(token))

    def calls(self, role: str | None = None) -> list[RecordedRequest]:
        return self.endpoint.calls(role)

    async def begun_token(self) -> types.ProgressToken:
        await eventually(
            lambda: any(self.began(token) for token in self.tokens), "a rewrite progress to begin"
        )
        return next(token for token in self.tokens if self.began(token))


def prepare(
    client: RewriteClient,
    scripted: ScriptedFactory,
    folder: Path,
    *rules: Rule,
    endpoint_url: str | None = None,
    **settings: Any,
) -> Corner:
    """The test's endpoint (its `rules` first, then the scripted answers for every rewriting role) and settings
    scoped to `folder`; `section_key=value` adds settings (rewrite_transcripts=True)."""
    endpoint = scripted(*rules, *rewrite_rules())
    client.set_configuration(
        margin_settings(folder, endpoint_url or endpoint.base_url, **settings),
        section="margin",
        scope_uri=folder.as_uri() + "/",
    )
    return Corner(
        client,
        endpoint,
        folder,
        frozenset(client.progress_reports),
        len(client.messages),
        len(client.edit_requests),
        len(client.shown_documents),
    )


def open_folder(client: RewriteClient, folder: Path) -> None:
    """Make `folder` a workspace folder, as an editor opened on a paper does: a sub-file's `% !TEX root` is
    followed only inside the workspace."""
    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)], removed=[]
            )
        )
    )


def scripted_answer(request: RecordedRequest) -> Reply:
    """What `rewrite_rules()` answers to `request`."""
    respond = rewrite_rules()[0].respond
    assert respond is not None
    return respond(request)


def is_repair(request: RecordedRequest) -> bool:
    return "Your rewrite lost" in request.prompt


def dropping(citation: str, *, repair: bool) -> Callable[[RecordedRequest], Reply]:
    """A simplifier that answers as the scripted one but drops `citation` from every text it gives; asked to
    repair, it puts the citation back (a plain rewrite of the original) when `repair`, else drops it again."""

    def respond(request: RecordedRequest) -> Reply:
        if is_repair(request) and repair:
            original = request.prompt.rsplit("Original:\n", 1)[1].split("\n\n", 1)[0]
            return Reply(json={"text": plainer(original)})
        answer = json.loads(scripted_answer(request).text())
        if isinstance(answer.get("text"), str):
            answer["text"] = answer["text"].replace("~" + citation, "").replace(citation, "")
        return Reply(json=answer)

    return respond


def delayed_once(seconds: float) -> Callable[[RecordedRequest], Reply]:
    """The scripted answer; the first request waits `seconds` before it is answered."""
    answered: list[RecordedRequest] = []

    def respond(request: RecordedRequest) -> Reply:
        answered.append(request)
        reply = scripted_answer(request)
        return dataclasses.replace(reply, delay=seconds) if len(answered) == 1 else reply

    return respond


def only_edit(corner: Corner) -> tuple[types.TextDocumentEdit, list[types.TextEdit]]:
    (request,) = corner.edits
    assert request.edit.changes is None
    (change,) = request.edit.document_changes or []
    assert isinstance(change, types.TextDocumentEdit)
    return change, [edit for edit in change.edits if isinstance(edit, types.TextEdit)]


def lines_of(text: str, first: int, last: int) -> str:
    return "\n".join(text.split("\n")[first : last + 1])


# -- listing the actions ------------------------------------------------------------------------------------------


async def test_listing_rewrite_actions_costs_no_model_call(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path)
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)

    inside = await shared.code_actions(uri, FIRST_LINE + 1, 10)
    by_title = {action.title: action for action in inside}
    simplify = by_title["Simplify paragraph"]
    assert simplify.kind == types.CodeActionKind.RefactorRewrite
    assert simplify.command is not None and simplify.command.command == SIMPLIFY_PARAGRAPH
    assert list(simplify.command.arguments or []) == [uri, FIRST_LINE + 1, 10]
    assert simplify.edit is None  # the rewrite is computed only when the user picks the action
    for title, command in (("Simplify document", SIMPLIFY_DOCUMENT), ("Generate lay article", LAY_ARTICLE)):
        action = by_title[title]
        assert action.kind == types.CodeActionKind.Source
        assert action.command is not None and action.command.command == command
        assert list(action.command.arguments or []) == [uri]

    on_heading = {action.title for action in await shared.code_actions(uri, 2, 3)}
    assert "Simplify paragraph" not in on_heading
    assert {"Simplify document", "Generate lay article"} <= on_heading

    assert corner.endpoint.requests == []  # not even GET /models
    assert corner.edits == [] and corner.tokens == []


async def test_code_actions_honour_context_only(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path)
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)

    async def titles(*only: str) -> set[str]:
        return {action.title for action in await shared.code_actions(uri, FIRST_LINE, 4, only=only)}

    assert await titles("refactor.rewrite") == {"Simplify paragraph"}
    assert await titles("refactor") == {"Simplify paragraph"}  # kinds are hierarchical
    assert "Simplify paragraph" not in await titles("source")
    assert {"Simplify document", "Generate lay article"} <= await titles("source")
    assert await titles("quickfix") == set()


# -- Simplify paragraph -----------------------------------------------------------------------------------------


async def test_simplify_paragraph_sends_one_edit_for_the_version_it_read_and_keeps_the_markup(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path)
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)

    outcome = await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE + 1, 5)

    assert outcome["status"] == "applied" and outcome["rewritten"] == 1, outcome
    change, (edit,) = only_edit(corner)
    assert change.text_document.uri == uri and change.text_document.version == 1
    assert edit.range == paragraph_range(LATEX_LINES, FIRST_LINE, FIRST_LINE + 1)
    assert corner.edits[0].label  # the editor's undo entry has a name

    text = shared.texts[uri]
    assert shared.versions[uri] == 2
    assert text == LATEX_TEXT.replace(FIRST_PARAGRAPH, edit.new_text)  # nothing else moved
    for protected in FIRST_PROTECTED:
        assert protected in edit.new_text, protected
    for formal, plain in (("approximately", "about"), ("However", "But"), ("therefore", "so")):
        assert formal not in edit.new_text and plain in edit.new_text, formal
    assert SECOND_PARAGRAPH in text
    assert {call.role for call in corner.calls()} >= {"selector", "layperson", "expert", "simplifier"}
    complaints = [
        m for m in corner.messages if m.type in (types.MessageType.Error, types.MessageType.Warning)
    ]
    assert complaints == []


async def test_simplify_paragraph_reports_progress_for_every_agent_step(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path, rewrite_transcripts=True)
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)

    assert (await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0))["status"] == "applied"

    (token,) = corner.tokens
    await eventually(lambda: corner.ended(token), "the progress to end")
    begin, *reports, end = corner.progress(token)
    assert isinstance(begin, types.WorkDoneProgressBegin)
    assert begin.title == "margin" and begin.cancellable is True
    assert begin.message == "Simplifying the paragraph"
    assert isinstance(end, types.WorkDoneProgressEnd)
    assert all(isinstance(report, types.WorkDoneProgressReport) for report in reports)
    (saved,) = (tmp_path / ".margin" / "transcripts").glob("*.json")
    turns = json.loads(saved.read_text(encoding="utf-8"))["turns"]
    # One report per agent turn, in order, from the first one on.
    assert [report.message for report in reports] == [turn["step"] for turn in turns]
    assert reports[0].message == "Agent selector choosing the next loop (1/6)"


async def test_a_document_changed_during_the_rewrite_gets_no_edit_and_the_action_replays_from_the_cache(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path, Rule(role="simplifier", respond=delayed_once(1.0)))
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)

    running = asyncio.ensure_future(shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 3))
    await eventually(lambda: bool(corner.calls("simplifier")), "the simplifier to be asked")
    edited = LATEX_TEXT.replace("no site was dropped", "no station was dropped")  # the other paragraph
    shared.replace_text(uri, edited)
    outcome = await running

    assert outcome["status"] == "stale", outcome
    assert corner.edits == []
    assert shared.texts[uri] == edited
    (told,) = corner.messages
    assert told.type == types.MessageType.Warning
    assert "changed while margin was working" in told.message and "nothing was changed" in told.message
    calls = len(corner.calls())

    again = await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 3)

    assert again["status"] == "applied", again
    change, (edit,) = only_edit(corner)
    assert change.text_document.version == 2  # the version the second run read
    assert len(corner.calls()) == calls  # every model answer came from the cache
    assert shared.texts[uri] == edited.replace(FIRST_PARAGRAPH, edit.new_text)
    assert "no station was dropped" in shared.texts[uri]


async def test_a_rewrite_that_drops_a_citation_is_repaired_once(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(
        shared, scripted, tmp_path, Rule(role="simplifier", respond=dropping(DROPPED_CITATION, repair=True))
    )
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)

    outcome = await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0)

    assert outcome["status"] == "applied", outcome
    (repair,) = [call for call in corner.calls("simplifier") if is_repair(call)]
    lost = repair.prompt.split("Your rewrite lost", 1)[1]
    assert DROPPED_CITATION in lost  # the repair request names what was lost
    _, (edit,) = only_edit(corner)
    for protected in FIRST_PROTECTED:
        assert protected in edit.new_text, protected
    assert shared.texts[uri] == LATEX_TEXT.replace(FIRST_PARAGRAPH, edit.new_text)


async def test_a_rewrite_that_keeps_dropping_a_citation_is_refused_and_named(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(
        shared, scripted, tmp_path, Rule(role="simplifier", respond=dropping(DROPPED_CITATION, repair=False))
    )
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)

    outcome = await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0)

    assert outcome["status"] == "refused" and outcome["refused"] == 1, outcome
    assert len([call for call in corner.calls("simplifier") if is_repair(call)]) == 1
    assert corner.edits == []
    assert shared.texts[uri] == LATEX_TEXT and shared.versions[uri] == 1
    (told,) = corner.messages
    assert told.type == types.MessageType.Warning
    assert "not applied" in told.message and DROPPED_CITATION in told.message


async def test_an_edit_the_editor_rejects_is_reported(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path)
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)
    shared.accept_edits = False
    try:
        outcome = await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0)
    finally:
        shared.accept_edits = True

    assert outcome["status"] == "rejected", outcome
    assert len(corner.edits) == 1
    (told,) = corner.messages
    assert "did not apply" in told.message and "the user said no" in told.message


async def test_no_paragraph_at_the_position_is_said_without_a_model_call(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path)
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)

    outcome = await shared.execute(SIMPLIFY_PARAGRAPH, uri, 4, 0)

    assert outcome["status"] == "none", outcome
    assert corner.endpoint.requests == [] and corner.edits == [] and corner.tokens == []
    (told,) = corner.messages
    assert "no paragraph" in told.message


# -- cancellation and a busy server ----------------------------------------------------------------------------


async def start_hanging_rewrite(corner: Corner, uri: str) -> tuple[asyncio.Future[Any], types.ProgressToken]:
    """Start "Simplify paragraph" with every simplifier call hanging; return once one is in flight."""
    corner.client.open(uri, LATEX_TEXT)
    running = asyncio.ensure_future(corner.client.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0))
    await eventually(lambda: bool(corner.calls("simplifier")), "a simplifier call in flight")
    return running, await corner.begun_token()


async def test_cancelling_the_progress_stops_the_run_and_closes_its_model_request(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path, Rule(role="simplifier", replies=[Reply(hang=True)]))
    uri = corner.uri("paper.tex")
    running, token = await start_hanging_rewrite(corner, uri)
    calls = len(corner.calls())

    shared.cancel_progress(token)
    outcome = await asyncio.wait_for(running, WAIT)

    assert outcome["status"] == "cancelled", outcome
    (hung,) = corner.calls("simplifier")
    await eventually(lambda: hung.disconnected, "the hanging HTTP request to be closed")
    await eventually(lambda: corner.ended(token), "the progress to end")
    await shared.hover_text(uri, FIRST_LINE, 0)  # a round trip: anything sent before it has arrived
    assert len(corner.calls()) == calls
    assert corner.edits == [] and shared.texts[uri] == LATEX_TEXT
    assert [m for m in corner.messages if m.type == types.MessageType.Warning] == []


async def test_cancelling_the_command_request_stops_the_run(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path, Rule(role="simplifier", replies=[Reply(hang=True)]))
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)
    request_id = f"simplify-{uuid.uuid4().hex[:8]}"
    running = asyncio.ensure_future(
        shared.protocol.send_request_async(
            types.WORKSPACE_EXECUTE_COMMAND,
            types.ExecuteCommandParams(command=SIMPLIFY_PARAGRAPH, arguments=[uri, FIRST_LINE, 0]),
            msg_id=request_id,
        )
    )
    await eventually(lambda: bool(corner.calls("simplifier")), "a simplifier call in flight")
    token = await corner.begun_token()
    try:
        shared.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=request_id))
        with pytest.raises(Exception, match="cancel"):
            await asyncio.wait_for(running, WAIT)
        (hung,) = corner.calls("simplifier")
        await eventually(lambda: hung.disconnected, "the hanging HTTP request to be closed", SHORT_WAIT)
        await eventually(lambda: corner.ended(token), "the progress to end", SHORT_WAIT)
        assert corner.edits == []
    finally:
        shared.cancel_progress(token)  # stop the run for good if the request's cancellation did not
        await eventually(lambda: corner.ended(token), "the progress to end")


async def test_the_server_answers_while_a_rewrite_runs_and_refuses_the_same_rewrite_twice(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path, Rule(role="simplifier", replies=[Reply(hang=True)]))
    uri = corner.uri("paper.tex")
    running, token = await start_hanging_rewrite(corner, uri)
    try:
        hover = await shared.hover_text(uri, SECOND_LINE, 4, timeout=5)
        assert hover is not None and "Flesch-Kincaid" in hover
        actions = await shared.code_actions(uri, SECOND_LINE, 4)
        assert "Simplify paragraph" in {action.title for action in actions}

        second = await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE + 1, 2, timeout=5)
        assert second["status"] == "busy", second
        assert any("already running" in message.message for message in corner.messages)
        assert not running.done()
    finally:
        shared.cancel_progress(token)
    assert (await asyncio.wait_for(running, WAIT))["status"] == "cancelled"
    assert corner.edits == []


async def test_margin_status_reports_the_endpoint_in_use_and_the_running_rewrite(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    """What the VS Code status bar shows comes from margin.status: no network, only what the server knows."""
    corner = prepare(shared, scripted, tmp_path, Rule(role="simplifier", replies=[Reply(hang=True)]))
    uri = corner.uri("paper.tex")
    running, token = await start_hanging_rewrite(corner, uri)
    try:
        status = await shared.execute("margin.status", timeout=5)
        assert status["rewrites"] == 1
        assert isinstance(status["reviews"], int) and isinstance(status["endpoint"], str)
        in_use = {endpoint["url"]: endpoint for endpoint in status["endpoints"]}
        assert corner.endpoint.base_url in in_use
        assert in_use[corner.endpoint.base_url]["model"] == SCRIPTED_MODEL
    finally:
        shared.cancel_progress(token)
    await asyncio.wait_for(running, WAIT)
    assert (await shared.execute("margin.status", timeout=5))["rewrites"] == 0


async def test_a_dead_endpoint_is_said_clearly_and_nothing_is_changed(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path, dead_url: str
) -> None:
    corner = prepare(shared, scripted, tmp_path, endpoint_url=dead_url)
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)

    outcome = await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0)

    assert outcome["status"] == "failed", outcome
    assert corner.edits == [] and shared.texts[uri] == LATEX_TEXT
    (told,) = [m for m in corner.messages if m.type == types.MessageType.Warning]
    assert "could not be simplified" in told.message and "No LLM server answered" in told.message
    assert dead_url in told.message

    lay = await shared.execute(LAY_ARTICLE, uri)
    assert lay["status"] == "failed", lay
    assert "no lay article was written" in corner.messages[-1].message
    assert not list(tmp_path.glob("*.md")) and corner.shown == []

    assert (await shared.hover_text(uri, FIRST_LINE, 0)) is not None  # still serving


# -- Simplify document ---------------------------------------------------------------------------------------------


async def test_simplify_document_sends_one_edit_per_paragraph_none_overlapping(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path)
    uri = corner.uri("paper.md")
    shared.open(uri, MARKDOWN_TEXT)

    outcome = await shared.execute(SIMPLIFY_DOCUMENT, uri)

    assert outcome["status"] == "applied" and outcome["rewritten"] == 3, outcome
    change, edits = only_edit(corner)
    assert change.text_document.version == 1
    assert [edit.range for edit in edits] == [
        paragraph_range(MARKDOWN_LINES, first, last) for first, last in MARKDOWN_PARAGRAPH_LINES
    ]  # each paragraph whole, in order, so none overlaps another
    expected = MARKDOWN_TEXT
    for edit, (first, last), protected in zip(
        edits, MARKDOWN_PARAGRAPH_LINES, MARKDOWN_PROTECTED, strict=True
    ):
        original = lines_of(MARKDOWN_TEXT, first, last)
        assert edit.new_text != original
        for element in protected:
            assert element in edit.new_text, element
        expected = expected.replace(original, edit.new_text)
    assert (
        shared.texts[uri] == expected
    )  # headings, front matter, the short and the marked-off text as they were
    assert "However, this scratch paragraph is off limits" in shared.texts[uri]
    assert "\U0001f30a" in edits[1].new_text and "\U0001d6fc" in edits[2].new_text
    (token,) = corner.tokens
    assert corner.progress(token)[0].message == "Simplifying 3 paragraphs"


async def test_simplify_document_applies_the_kept_paragraphs_and_says_which_were_refused(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    drop = dropping("[@lee2021, p. 4]", repair=False)
    corner = prepare(
        shared,
        scripted,
        tmp_path,
        Rule(role="simplifier", respond=drop),
        Rule(role="terminology_interpreter", respond=drop),
        Rule(role="proofreader", pattern="Your rewrite lost", respond=drop),
    )
    uri = corner.uri("paper.md")
    shared.open(uri, MARKDOWN_TEXT)

    outcome = await shared.execute(SIMPLIFY_DOCUMENT, uri)

    assert outcome["status"] == "applied", outcome
    assert (outcome["rewritten"], outcome["refused"]) == (2, 1)
    _, edits = only_edit(corner)
    assert [edit.range for edit in edits] == [
        paragraph_range(MARKDOWN_LINES, first, last) for first, last in MARKDOWN_PARAGRAPH_LINES[1:]
    ]
    assert lines_of(MARKDOWN_TEXT, 6, 7) in shared.texts[uri]  # the refused paragraph as it was
    assert any(
        "1 paragraph(s) kept as they were" in m.message and "@lee2021" in m.message for m in corner.messages
    )


# -- Generate lay article --------------------------------------------------------------------------------------


def front_matter(text: str) -> dict[str, Any]:
    """The YAML front matter, parsed."""
    assert text.startswith("---\n"), text[:80]
    header = yaml.safe_load(text[4 : text.index("\n---\n", 4)])
    assert isinstance(header, dict)
    return header


async def test_the_lay_article_of_a_multi_file_paper_goes_beside_its_root_and_never_over_a_file(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    paper = tmp_path / "paper"
    shutil.copytree(FIXTURES / "latex" / "paper", paper)
    corner = prepare(shared, scripted, tmp_path, lay_iterations=1)
    open_folder(shared, paper)
    section = paper / "sections" / "appendix.tex"  # "% !TEX root = ../main.tex"
    uri = section.as_uri()
    shared.open(uri, section.read_text(encoding="utf-8"))

    first = await shared.execute(LAY_ARTICLE, uri)

    article = paper / "main-lay-article.md"
    assert first == {**first, "status": "written", "path": str(article)}, first
    text = article.read_text(encoding="utf-8")
    header = front_matter(text)
    assert header["source"] == "main.tex"
    assert header["generator"].startswith("margin ") and "JRE-L" in header["generator"]
    assert header["iterations"] == 1
    assert header["models"]["journalist"] == SCRIPTED_MODEL
    assert [version["iteration"] for version in header["readability"]] == [0, 1]
    assert "Why Na" in header["title"]  # the paper's title
    assert [shown.uri for shown in corner.shown] == [article.as_uri()]
    assert corner.shown[0].take_focus is True
    assert {call.role for call in corner.calls()} == {"journalist", "reader", "editor"}
    assert corner.edits == []

    second = await shared.execute(LAY_ARTICLE, uri)

    again = paper / "main-lay-article-2.md"
    assert second["status"] == "written" and second["path"] == str(again), second
    assert article.read_text(encoding="utf-8") == text  # the first one untouched
    assert again.read_text(encoding="utf-8").startswith("---\n")
    assert [shown.uri for shown in corner.shown] == [article.as_uri(), again.as_uri()]
    assert sorted(path.name for path in paper.rglob("*.md")) == [
        "main-lay-article-2.md",
        "main-lay-article.md",
    ]


# -- transcripts -----------------------------------------------------------------------------------------------


async def test_transcripts_go_to_the_workspace_folder(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    drafts = workspace / "drafts"
    drafts.mkdir(parents=True)
    shared.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=workspace.as_uri(), name="workspace")], removed=[]
            )
        )
    )
    corner = prepare(shared, scripted, workspace, rewrite_transcripts=True)
    uri = (drafts / "paper.tex").as_uri()
    shared.open(uri, LATEX_TEXT)

    assert (await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0))["status"] == "applied"

    (saved,) = (workspace / ".margin" / "transcripts").glob("*.json")
    assert saved.name.startswith("paper-soms-")
    transcript = json.loads(saved.read_text(encoding="utf-8"))
    assert transcript["method"] == "soms"
    assert len(transcript["turns"]) == len(corner.calls())
    assert {turn["role"] for turn in transcript["turns"]} == {call.role for call in corner.calls()}
    assert all(turn["messages"] and turn["output"] for turn in transcript["turns"])
    assert transcript["settings"]["simplify.paragraphMethod"] == "soms"
    assert not (drafts / ".margin").exists()


async def test_no_transcript_is_saved_by_default(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path)
    uri = corner.uri("paper.tex")
    shared.open(uri, LATEX_TEXT)
    assert (await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0))["status"] == "applied"
    assert not (tmp_path / ".margin" / "transcripts").exists()


async def test_a_crlf_document_keeps_its_line_endings_around_the_rewrite(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path)
    uri = corner.uri("paper.tex")
    text = LATEX_TEXT.replace("\n", "\r\n")
    shared.open(uri, text)

    assert (await shared.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE + 1, 0))["status"] == "applied"

    _, (edit,) = only_edit(corner)
    assert edit.range == paragraph_range(LATEX_LINES, FIRST_LINE, FIRST_LINE + 1)
    assert shared.texts[uri] == text.replace(FIRST_PARAGRAPH.replace("\n", "\r\n"), edit.new_text)
    assert shared.texts[uri].count("\n") == shared.texts[uri].count("\r\n")


async def test_simplify_document_of_an_included_latex_file_edits_only_that_file(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    paper = tmp_path / "paper"
    shutil.copytree(FIXTURES / "latex" / "paper", paper)
    corner = prepare(shared, scripted, tmp_path)
    open_folder(shared, paper)
    appendix = paper / "sections" / "appendix.tex"  # "% !TEX root = ../main.tex"
    uri = appendix.as_uri()
    original = appendix.read_text(encoding="utf-8")
    shared.open(uri, original)

    outcome = await shared.execute(SIMPLIFY_DOCUMENT, uri)

    assert outcome["status"] == "applied", outcome
    change, edits = only_edit(corner)
    assert change.text_document.uri == uri
    assert len(edits) == outcome["rewritten"] >= 1
    text = shared.texts[uri]
    assert "We have not, but, tested this explanation" in text
    table = original[original.index(r"\begin{table}") : original.index(r"\end{table}")]
    assert table in text and r"\label{sec:additional}" in text
    director = corner.calls("director")[0].prompt
    assert "The central finding of this work" in director  # the director reads the whole manuscript


async def test_simplify_document_with_a_dead_endpoint_fails_with_a_warning(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path, dead_url: str
) -> None:
    corner = prepare(shared, scripted, tmp_path, endpoint_url=dead_url)
    uri = corner.uri("paper.md")
    shared.open(uri, MARKDOWN_TEXT)

    outcome = await shared.execute(SIMPLIFY_DOCUMENT, uri)

    assert corner.edits == [] and shared.texts[uri] == MARKDOWN_TEXT
    assert outcome["failed"] == 3, outcome
    (told,) = corner.messages
    assert "No LLM server answered" in told.message
    assert outcome["status"] == "failed"
    assert told.type in (types.MessageType.Warning, types.MessageType.Error)


async def test_cancelling_a_lay_article_writes_no_file(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path, Rule(role="reader", replies=[Reply(hang=True)]))
    path = tmp_path / "paper.md"
    path.write_text(MARKDOWN_TEXT, encoding="utf-8")
    uri = path.as_uri()
    shared.open(uri, MARKDOWN_TEXT)
    running = asyncio.ensure_future(shared.execute(LAY_ARTICLE, uri))
    await eventually(lambda: bool(corner.calls("reader")), "the reader to be asked")
    token = await corner.begun_token()
    assert corner.progress(token)[0].message == "Writing a lay article"

    shared.cancel_progress(token)

    assert (await asyncio.wait_for(running, WAIT))["status"] == "cancelled"
    await eventually(lambda: corner.calls("reader")[0].disconnected, "the reader's request to be closed")
    assert [article.name for article in tmp_path.glob("*.md")] == ["paper.md"]
    assert corner.shown == []


async def test_a_lay_article_of_an_unsaved_document_asks_to_save_it_first(
    shared: RewriteClient, scripted: ScriptedFactory, tmp_path: Path
) -> None:
    corner = prepare(shared, scripted, tmp_path)
    uri = f"untitled:Untitled-{uuid.uuid4().hex[:6]}"
    shared.set_configuration(
        margin_settings(tmp_path, corner.endpoint.base_url), section="margin", scope_uri=uri
    )
    shared.open(uri, LATEX_TEXT)

    outcome = await shared.execute(LAY_ARTICLE, uri)

    assert outcome["status"] == "none", outcome
    assert "save the manuscript to a file first" in corner.messages[-1].message
    assert corner.endpoint.requests == [] and corner.shown == []


# -- a client with fewer capabilities ----------------------------------------------------------------------------


def plain_client() -> types.ClientCapabilities:
    """VS Code's capabilities without work-done progress, showDocument or versioned document changes."""
    capabilities = vscode()
    assert capabilities.window is not None and capabilities.workspace is not None
    capabilities.window.work_done_progress = False
    capabilities.window.show_document = None
    assert capabilities.workspace.workspace_edit is not None
    capabilities.workspace.workspace_edit.document_changes = False
    return capabilities


@contextlib.asynccontextmanager
async def fresh_server(folder: Path, settings: dict[str, Any], capabilities: types.ClientCapabilities) -> Any:
    client = await CONFIG.start()
    assert isinstance(client, RewriteClient)
    client.set_configuration(settings, section="margin")
    try:
        await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=capabilities,
                    initialization_options={"margin": settings, "enforcesSettingScopes": True},
                    root_uri=folder.as_uri(),
                )
            ),
            WAIT,
        )
        yield client
    finally:
        await stop_session(client)


async def test_a_client_without_progress_show_document_or_document_changes_still_gets_the_work_done(
    scripted: ScriptedFactory, tmp_path: Path
) -> None:
    endpoint = scripted(*rewrite_rules())
    settings = margin_settings(tmp_path, endpoint.base_url, lay_iterations=0)
    async with fresh_server(tmp_path, settings, plain_client()) as client:
        uri = (tmp_path / "paper.tex").as_uri()
        (tmp_path / "paper.tex").write_text(LATEX_TEXT, encoding="utf-8")
        client.open(uri, LATEX_TEXT)

        outcome = await client.execute(SIMPLIFY_PARAGRAPH, uri, FIRST_LINE, 0)

        assert outcome["status"] == "applied", outcome
        (request,) = client.edit_requests
        assert request.edit.document_changes is None and request.edit.changes is not None
        (edit,) = request.edit.changes[uri]
        assert edit.range == paragraph_range(LATEX_LINES, FIRST_LINE, FIRST_LINE + 1)
        assert client.texts[uri] == LATEX_TEXT.replace(FIRST_PARAGRAPH, edit.new_text)
        assert client.progress_reports == {}  # no window/workDoneProgress/create, no $/progress

        lay = await client.execute(LAY_ARTICLE, uri)

        article = tmp_path / "paper-lay-article.md"
        assert lay["status"] == "written" and lay["path"] == str(article), lay
        assert article.is_file() and client.shown_documents == []
        assert any(str(article) in message.message for message in client.messages)
