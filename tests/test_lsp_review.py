"""Focused feedback through the language server, end to end: margin's server over stdio (pytest-lsp), its model
calls answered by real scripted OpenAI-compatible endpoints on loopback.

Starting a server costs seconds (imports), so most tests share one VS Code-profile server and isolate
themselves the way a multi-root workspace would: each test has its own folder (tmp_path) whose settings,
answered through workspace/configuration, name the test's own scripted endpoint and its own cache file; its
paragraphs carry a tag of their own, so no test sees another's results. Tests that need a fresh process
(a restart, other client capabilities) start one with `review_server`.

The scripted reviewer recognises the paragraph it is asked about by a marker phrase and answers with that
paragraph's findings, so a test knows exactly which diagnostics to expect and can count the model calls.
Synchronisation is by waiting for notifications, responses and endpoint state, never by sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint

from conftest import (
    LSP_WAIT,
    SERVER_COMMAND,
    RecordingClient,
    eventually,
    fix_code_action_hook,
    recording_client,
    stop_session,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = LSP_WAIT  # seconds; only turns a hang into a failure
SHORT_WAIT = 3.0  # for the few waits that a known bug turns into a timeout (xfail tests)

REVIEW_PARAGRAPH = "margin.reviewParagraph"
REVIEW_DOCUMENT = "margin.reviewDocument"
STATUS = "margin.status"
DISMISS_FINDING = "margin.dismissFinding"

REPLICABILITY = "Replicability"
SOUNDNESS = "Empirical and Theoretical Soundness"
COMPARISON = "Meaningful Comparison"
SUBSTANCE = "Substance"

# -- the manuscript ----------------------------------------------------------------------------------------

METHODS_1 = "We trained the classifier on a private corpus of clinical notes collected at a single hospital,"
METHODS_2 = "and we tuned every hyperparameter by hand until the validation accuracy stopped improving."
RESULTS = (
    "Our approach outperforms all previous methods by a wide margin on the benchmark, which shows that "
    "attention over clinical notes is the key ingredient for accurate diagnosis prediction in every hospital."
)
SHORT = "This note is short."
DATA = (
    "The evaluation corpus contains clinical notes from twelve thousand patients admitted between 2015 and "
    "2019, split by admission date into training, validation and test portions of similar size."
)
SKIPPED = (
    "This confidential appendix paragraph is long enough to be reviewed, but it sits inside a region that the "
    "author marked for margin to skip, so no model should ever be asked about these words."
)
RESULTS_LINE, SHORT_LINE, DATA_LINE = 5, 7, 9


def paper(tag: str) -> str:
    """The test manuscript; `tag` ends every paragraph so that its paragraph ids are the test's own."""
    return "\n".join(
        [
            "# Study",  # 0
            "",  # 1
            METHODS_1,  # 2
            f"{METHODS_2} Ref {tag}.",  # 3
            "",  # 4
            f"{RESULTS} Ref {tag}.",  # 5
            "",  # 6
            f"{SHORT} Ref {tag}.",  # 7
            "",  # 8
            f"{DATA} Ref {tag}.",  # 9
            "",  # 10
            "<!-- margin: off -->",  # 11
            "",  # 12
            f"{SKIPPED} Ref {tag}.",  # 13
            "",  # 14
            "<!-- margin: on -->",  # 15
            "",
        ]
    )


def tag_for(folder: Path) -> str:
    return "t" + hashlib.sha1(str(folder).encode()).hexdigest()[:8]


# Marker phrases: how the scripted reviewer tells the paragraphs apart.
M_METHODS, M_RESULTS, M_DATA, M_SHORT, M_SKIPPED = (
    "private corpus",
    "outperforms",
    "twelve thousand",
    "note is short",
    "confidential appendix",
)

Q_PRIVATE = "a private corpus of clinical notes"
Q_ACROSS = "single hospital, and we tuned every hyperparameter by hand"  # crosses the source line break
Q_OUTPERFORMS = "outperforms all previous methods"

F_PRIVATE = {
    "quote": Q_PRIVATE,
    "label": REPLICABILITY,
    "review": "The corpus is private: say how others can obtain it, or a comparable one.",
    "reasoning": "Nobody else can rerun the experiment without the data.",
}
F_ACROSS = {
    "quote": Q_ACROSS,
    "label": SOUNDNESS,
    "review": "Hand tuning on one hospital's notes may overfit; report a held-out site.",
    "reasoning": "Manual tuning against validation accuracy leaks information.",
}
F_OUTPERFORMS = {
    "quote": Q_OUTPERFORMS,
    "label": COMPARISON,
    "review": "Name the previous methods and give their scores next to yours.",
    "reasoning": "A comparison without named baselines cannot be checked.",
}
PAPER_FINDINGS = {M_METHODS: [F_PRIVATE, F_ACROSS], M_RESULTS: [F_OUTPERFORMS], M_DATA: []}
REVIEWABLE_IN_PAPER = 3  # METHODS, RESULTS, DATA: SHORT is under review.minWords, SKIPPED is marked off

Span = tuple[tuple[int, int], tuple[int, int]]


def source_span(text: str, source_quote: str) -> Span:
    """The LSP span of the only occurrence of `source_quote` in `text` (ASCII text: characters are UTF-16)."""
    assert text.count(source_quote) == 1, source_quote
    start = text.index(source_quote)
    return position_at(text, start), position_at(text, start + len(source_quote))


def position_at(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    line = before.count("\n")
    return line, offset - (before.rfind("\n") + 1)


def span(diagnostic_or_range: types.Diagnostic | types.Range) -> Span:
    value = (
        diagnostic_or_range.range
        if isinstance(diagnostic_or_range, types.Diagnostic)
        else diagnostic_or_range
    )
    return (value.start.line, value.start.character), (value.end.line, value.end.character)


def shifted(value: Span, lines: int) -> Span:
    (start_line, start_char), (end_line, end_char) = value
    return (start_line + lines, start_char), (end_line + lines, end_char)


def lsp_range(value: Span) -> types.Range:
    (start_line, start_char), (end_line, end_char) = value
    return types.Range(
        start=types.Position(line=start_line, character=start_char),
        end=types.Position(line=end_line, character=end_char),
    )


def findings(diagnostics: Sequence[types.Diagnostic]) -> list[types.Diagnostic]:
    """margin's focused-feedback diagnostics (everything from margin but readability and file problems)."""
    return [
        d for d in diagnostics if d.source == "margin" and isinstance(d.data, dict) and "dismissal" in d.data
    ]


def by_code(diagnostics: Sequence[types.Diagnostic]) -> dict[str, types.Diagnostic]:
    found = {str(d.code): d for d in findings(diagnostics)}
    assert len(found) == len(findings(diagnostics)), diagnostics
    return found


# -- the scripted model ------------------------------------------------------------------------------------

GATE = 3600.0  # a Reply delay this long means: wait until the endpoint's gate opens


@dataclass
class GatedEndpoint(ScriptedEndpoint):
    """The scripted endpoint, plus a gate: replies with delay=GATE wait until `gate` is set (or the server
    stops), so a test can hold requests in flight for exactly as long as it needs."""

    gate: threading.Event = field(default_factory=threading.Event)

    def _wait(self, seconds: float) -> None:
        if seconds < GATE:
            super()._wait(seconds)
            return
        while not self.gate.wait(0.02) and not self._stopping.is_set():
            pass

    def stop(self) -> None:
        self.gate.set()
        super().stop()


def reviewed_paragraph(request: RecordedRequest) -> str:
    """The paragraph a reviewer (or repair) request is about: its first user message, without the context."""
    messages = request.body.get("messages") or []
    first_user = next(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    return first_user.removeprefix("Paragraph:\n").split("\n\nContext gathered", 1)[0]


@dataclass
class Reviewer:
    """Answers reviewer requests: the findings scripted for the first marker found in the paragraph.
    `hang`, `gated` and `failing` (HTTP 500) change the answers for paragraphs with those markers; a test
    may change them as it goes."""

    scripts: dict[str, list[dict[str, str]]]
    hang: set[str] = field(default_factory=set)
    gated: set[str] = field(default_factory=set)
    failing: set[str] = field(default_factory=set)

    def __call__(self, request: RecordedRequest) -> Reply:
        paragraph = reviewed_paragraph(request)
        for marker, scripted in self.scripts.items():
            if marker in paragraph:
                if marker in self.hang:
                    return Reply(hang=True)
                if marker in self.failing:
                    return Reply(status=500, error_message="scripted outage")
                return Reply(json={"findings": scripted}, delay=GATE if marker in self.gated else 0.0)
        return Reply(json={"findings": []})


def reviewer_calls(endpoint: ScriptedEndpoint, marker: str | None = None) -> list[RecordedRequest]:
    calls = endpoint.calls("reviewer")
    return [c for c in calls if marker is None or marker in reviewed_paragraph(c)]


@pytest.fixture
def endpoints() -> Iterator[Callable[..., GatedEndpoint]]:
    """Start gated scripted endpoints that are stopped (in the background) when the test ends."""
    started: list[GatedEndpoint] = []

    def start(*rules: Rule, **options: Any) -> GatedEndpoint:
        endpoint = GatedEndpoint(rules=list(rules), **options).start()
        started.append(endpoint)
        return endpoint

    yield start
    for endpoint in started:
        threading.Thread(target=endpoint.stop, name="gated-endpoint-stop", daemon=True).start()


# -- the client ----------------------------------------------------------------------------------------------


class ReviewClient(RecordingClient):
    """conftest's RecordingClient, also recording every work-done progress the server creates and how many
    saves the test had sent by then."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.created_tokens: list[types.ProgressToken] = []
        self.saves_sent = 0
        self.shared_root: Path | None = None  # the shared server's rootUri, as a path
        self.saves_before_token: dict[types.ProgressToken, int] = {}

    def notified(self, method: str, params: Any) -> None:
        if method == types.WINDOW_WORK_DONE_PROGRESS_CREATE:
            self.created_tokens.append(params.token)
            self.saves_before_token[params.token] = self.saves_sent
        super().notified(method, params)

    # -- documents -------------------------------------------------------------------------------------------

    def save(self, uri: str) -> None:
        self.saves_sent += 1
        self.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    # -- what came back --------------------------------------------------------------------------------------

    def latest(self, uri: str) -> list[types.Diagnostic]:
        for params in reversed(self.published):
            if params.uri == uri:
                return params.diagnostics
        return []

    async def published_findings(
        self, uri: str, count: int, version: int | None = None
    ) -> list[types.Diagnostic]:
        """Wait until the latest publish for `uri` (at `version`, if given) has exactly `count` findings."""

        def ready() -> bool:
            for params in reversed(self.published):
                if params.uri == uri:
                    return (version is None or params.version == version) and len(
                        findings(params.diagnostics)
                    ) == count
            return False

        await self.wait_until(ready, f"a publish for {uri} with {count} findings (version {version})")
        return findings(self.latest(uri))

    async def published_version(self, uri: str, version: int) -> list[types.Diagnostic]:
        return (await self.published_for(uri, version)).diagnostics

    def ever_published(self, uri: str) -> list[types.Diagnostic]:
        return [d for params in self.published if params.uri == uri for d in findings(params.diagnostics)]

    def progress(self, token: types.ProgressToken) -> list[Any]:
        return list(self.progress_reports.get(token, []))

    def ended(self, token: types.ProgressToken) -> bool:
        return any(isinstance(value, types.WorkDoneProgressEnd) for value in self.progress(token))

    async def reviews_finished(
        self, count: int, since: int = 0, timeout: float = WAIT
    ) -> list[types.ProgressToken]:
        """Wait until `count` review progresses created after the first `since` have all ended; return them."""

        def tokens() -> list[types.ProgressToken]:
            return self.created_tokens[since:]

        await self.wait_until(
            lambda: len(tokens()) >= count and all(self.ended(t) for t in tokens()),
            f"{count} review progress(es) to end",
            timeout,
        )
        return tokens()

    def begun(self, token: types.ProgressToken) -> bool:
        return any(isinstance(value, types.WorkDoneProgressBegin) for value in self.progress(token))

    # -- requests --------------------------------------------------------------------------------------------

    async def barrier(self, uri: str) -> None:
        """One round trip: everything the server sent before answering has arrived."""
        await self.hover_text(uri, 0, 0)

    async def code_actions(
        self, uri: str, at: tuple[int, int], diagnostics: Sequence[types.Diagnostic] = ()
    ) -> list[types.CodeAction]:
        fix_code_action_hook(self)
        where = lsp_range((at, at)) if not diagnostics else diagnostics[0].range
        answer = await asyncio.wait_for(
            self.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=where,
                    context=types.CodeActionContext(diagnostics=list(diagnostics)),
                )
            ),
            WAIT,
        )
        return [action for action in answer or [] if isinstance(action, types.CodeAction)]

    async def execute(self, command: str, *arguments: Any, timeout: float = WAIT) -> Any:
        return await asyncio.wait_for(
            self.workspace_execute_command_async(
                types.ExecuteCommandParams(command=command, arguments=list(arguments))
            ),
            timeout,
        )


def make_client() -> ReviewClient:
    return recording_client(
        ReviewClient,
        (
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
            types.WINDOW_SHOW_MESSAGE,
            types.WINDOW_LOG_MESSAGE,
            types.WORKSPACE_DIAGNOSTIC_REFRESH,
            types.WINDOW_WORK_DONE_PROGRESS_CREATE,
            types.PROGRESS,
        ),
    )


CONFIG = ClientServerConfig(server_command=SERVER_COMMAND, client_factory=make_client)


def vscode() -> types.ClientCapabilities:
    return client_capabilities("visual-studio-code")


def neovim(refresh_support: bool) -> types.ClientCapabilities:
    """Neovim 0.11 as pytest-lsp recorded it (no workspace.diagnostics), optionally with refreshSupport."""
    capabilities = client_capabilities("neovim@v0.11")
    if refresh_support:
        assert capabilities.workspace is not None
        capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return capabilities


@contextlib.asynccontextmanager
async def review_server(
    workspace: Path,
    endpoint_url: str,
    *,
    review: dict[str, Any] | None = None,
    llm: dict[str, Any] | None = None,
    capabilities: types.ClientCapabilities | None = None,
    folders: bool = True,
    enforces_scopes: bool = True,
) -> AsyncIterator[ReviewClient]:
    """A fresh server using `endpoint_url`, a private cache in `workspace`, and `workspace` as its workspace
    folder (or only as rootUri when `folders` is False). Reviews default to single mode."""
    # Like the VS Code extension, these clients keep a workspace from setting user-only settings (the tests
    # give each folder its own endpoint through workspace/configuration).
    options = {
        "margin": margin_settings(workspace, endpoint_url, review=review, llm=llm),
        "enforcesSettingScopes": enforces_scopes,
    }
    client = await CONFIG.start()
    assert isinstance(client, ReviewClient)
    root = workspace.as_uri()
    try:
        await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=capabilities or vscode(),
                    initialization_options=options,
                    root_uri=root,
                    workspace_folders=[types.WorkspaceFolder(uri=root, name="paper")] if folders else None,
                )
            ),
            WAIT,
        )
        yield client
    finally:
        await stop_session(client)


def margin_settings(
    workspace: Path,
    endpoint_url: str,
    *,
    review: dict[str, Any] | None = None,
    llm: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Complete margin settings (workspace/configuration answers replace the defaults, not merge with the
    initialization options): the endpoint, a private cache, no retries, single-mode reviews."""
    return {
        "llm": {"endpoint": endpoint_url, "retries": 0, "timeoutSeconds": 30, **(llm or {})},
        "cache": {"path": str(workspace / "cache.sqlite3")},
        # Up to three findings a paragraph (the default is one): these tests script several per paragraph.
        "review": {"mode": "single", "maxFindings": 3, **(review or {})},
    }


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def shared(lsp_client: ReviewClient, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[None]:
    """The server most tests share: VS Code's capabilities; rootUri only (no workspace folders), so that the
    tests that need a workspace folder add their own."""
    root = tmp_path_factory.mktemp("shared-root")
    lsp_client.shared_root = root
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


@dataclass
class Setup:
    client: ReviewClient
    endpoint: GatedEndpoint
    reviewer: Reviewer
    folder: Path
    tag: str
    tokens_before: int

    def uri(self, name: str = "paper.md") -> str:
        return (self.folder / name).as_uri()

    @property
    def paper(self) -> str:
        return paper(self.tag)

    def calls(self, marker: str | None = None) -> list[RecordedRequest]:
        return reviewer_calls(self.endpoint, marker)

    async def finished(self, count: int, timeout: float = WAIT) -> list[types.ProgressToken]:
        return await self.client.reviews_finished(count, self.tokens_before, timeout)

    @property
    def tokens(self) -> list[types.ProgressToken]:
        return self.client.created_tokens[self.tokens_before :]


def prepare(
    client: ReviewClient,
    endpoints: Callable[..., GatedEndpoint],
    folder: Path,
    scripts: dict[str, list[dict[str, str]]] | None = None,
    *,
    review: dict[str, Any] | None = None,
    llm: dict[str, Any] | None = None,
    endpoint_url: str | None = None,
    rules: Sequence[Rule] = (),
) -> Setup:
    """A test's own corner of the shared server: a reviewer endpoint, and settings scoped to `folder`."""
    reviewer = Reviewer(PAPER_FINDINGS if scripts is None else scripts)
    endpoint = endpoints(*rules, Rule(role="reviewer", respond=reviewer))
    settings = margin_settings(folder, endpoint_url or endpoint.base_url, review=review, llm=llm)
    client.set_configuration(settings, section="margin", scope_uri=folder.as_uri() + "/")
    return Setup(client, endpoint, reviewer, folder, tag_for(folder), len(client.created_tokens))


def markers_reviewed(setup: Setup) -> list[str]:
    markers = (M_METHODS, M_RESULTS, M_DATA, M_SHORT, M_SKIPPED)
    return [next((m for m in markers if m in reviewed_paragraph(call)), "?") for call in setup.calls()]


# -- what a finding looks like (VS Code: pushed) ---------------------------------------------------------------


async def test_open_publishes_one_warning_per_finding_over_the_quoted_source(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    uri, text = setup.uri(), setup.paper
    shared.open(uri, text)
    shown = by_code(await shared.published_findings(uri, 3))
    await setup.finished(1)

    expected = {
        REPLICABILITY: (F_PRIVATE, source_span(text, Q_PRIVATE)),
        SOUNDNESS: (F_ACROSS, source_span(text, Q_ACROSS.replace("hospital, ", "hospital,\n"))),
        COMPARISON: (F_OUTPERFORMS, source_span(text, Q_OUTPERFORMS)),
    }
    assert set(shown) == set(expected)
    for label, (finding, where) in expected.items():
        diagnostic = shown[label]
        assert span(diagnostic) == where, label
        assert diagnostic.severity == types.DiagnosticSeverity.Warning
        assert diagnostic.source == "margin"
        assert diagnostic.code == label
        assert diagnostic.message == finding["review"]
        assert diagnostic.related_information is None  # single mode gathers no evidence
    assert span(shown[SOUNDNESS])[0][0] == 2 and span(shown[SOUNDNESS])[1][0] == 3

    # One reviewer call per reviewable paragraph: not the short one, not the one marked off.
    assert sorted(markers_reviewed(setup)) == sorted([M_METHODS, M_RESULTS, M_DATA])
    assert all(M_SKIPPED not in call.prompt for call in setup.calls())

    # Hover on a finding shows the review and the reasoning; elsewhere in the paragraph, the scores.
    (line, start), _ = source_span(text, Q_OUTPERFORMS)
    for character in (start, start + 10, start + len(Q_OUTPERFORMS)):
        hover = await shared.hover_text(uri, line, character)
        assert hover is not None
        assert COMPARISON in hover and F_OUTPERFORMS["review"] in hover
        assert f"*Reasoning:* {F_OUTPERFORMS['reasoning']}" in hover
    elsewhere = await shared.hover_text(uri, RESULTS_LINE, len(RESULTS) - 3)
    assert elsewhere is not None and "Flesch-Kincaid" in elsewhere and "Reasoning" not in elsewhere


async def test_a_latex_quote_maps_onto_its_source_markup_with_the_configured_severity(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    finding = {
        "quote": "a robust estimator",
        "label": SUBSTANCE,
        "review": "Which estimator?",
        "reasoning": "-",
    }
    setup = prepare(shared, endpoints, tmp_path, {"forty stations": [finding]}, review={"severity": "error"})
    text = "\n".join(
        [
            r"\documentclass{article}",
            r"\begin{document}",
            r"\section{Method}",
            r"We fit a \emph{robust} estimator to the noisy sensor readings from all forty stations and report "
            rf"the mean absolute error, which we consider sufficient evidence of its reliability ({setup.tag}).",
            r"\end{document}",
            "",
        ]
    )
    uri = setup.uri("paper.tex")
    shared.open(uri, text)
    (diagnostic,) = await shared.published_findings(uri, 1)
    assert span(diagnostic) == source_span(text, r"a \emph{robust} estimator")
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.code == SUBSTANCE


async def test_progress_is_created_begun_reported_and_ended(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    shared.open(setup.uri(), setup.paper)
    (token,) = await setup.finished(1)
    begin, *reports, end = shared.progress(token)
    assert isinstance(begin, types.WorkDoneProgressBegin)
    assert begin.title == "margin" and begin.cancellable is True
    assert begin.message == "Reviewing 0/3 paragraphs" and begin.percentage == 0
    assert all(isinstance(value, types.WorkDoneProgressReport) for value in reports)
    assert [(r.message, r.percentage) for r in reports] == [
        ("Reviewing 1/3 paragraphs", 33),
        ("Reviewing 2/3 paragraphs", 66),
        ("Reviewing 3/3 paragraphs", 100),
    ]
    assert isinstance(end, types.WorkDoneProgressEnd) and end.message == "Reviewed 3/3 paragraphs"


# -- when reviews run ------------------------------------------------------------------------------------------


async def test_typing_starts_no_review_and_save_reviews_only_the_changed_paragraph(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    uri = setup.uri()
    shared.open(uri, setup.paper)
    await shared.published_findings(uri, 3)
    await setup.finished(1)
    assert len(setup.calls()) == 3

    # Type "wide" -> "large" in the results paragraph, one keystroke-sized change at a time.
    column = RESULTS.index("wide")
    shared.edit(uri, 2, (RESULTS_LINE, column), (RESULTS_LINE, column + 4), "")
    shared.edit(uri, 3, (RESULTS_LINE, column), (RESULTS_LINE, column), "l")
    shared.edit(uri, 4, (RESULTS_LINE, column + 1), (RESULTS_LINE, column + 1), "arge")
    after_typing = findings(await shared.published_version(uri, 4))
    # The edited paragraph's finding was for text that no longer exists; the others stay.
    assert {str(d.code) for d in after_typing} == {REPLICABILITY, SOUNDNESS}
    await shared.barrier(uri)
    assert len(setup.calls()) == 3
    assert len(setup.tokens) == 1

    shared.save(uri)
    shown = by_code(await shared.published_findings(uri, 3))
    await setup.finished(2)
    calls = setup.calls()
    assert len(calls) == 4  # only the changed paragraph; the others' results are kept
    assert "a large margin" in reviewed_paragraph(calls[-1])
    assert span(shown[COMPARISON]) == source_span(setup.paper.replace("wide", "large"), Q_OUTPERFORMS)


async def test_manual_trigger_reviews_only_on_command(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path, review={"trigger": "manual"})
    uri = setup.uri()
    shared.open(uri, setup.paper)
    await shared.published_version(uri, 1)
    shared.save(uri)
    await shared.barrier(uri)
    await shared.barrier(uri)
    assert setup.calls() == [] and setup.tokens == []

    assert await shared.execute(REVIEW_PARAGRAPH, uri, RESULTS_LINE, 10) == {"reviewed": 1}
    (only,) = await shared.published_findings(uri, 1)
    assert only.code == COMPARISON
    assert markers_reviewed(setup) == [M_RESULTS]

    await shared.execute(REVIEW_DOCUMENT, uri)
    assert set(by_code(await shared.published_findings(uri, 3))) == {REPLICABILITY, SOUNDNESS, COMPARISON}
    for marker in (M_METHODS, M_RESULTS, M_DATA):
        assert len(setup.calls(marker)) == 1, marker  # the results paragraph again: from the cache
    assert len(setup.tokens) == 2  # one progress per command


async def test_no_review_action_outside_paragraphs(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path, review={"trigger": "manual"})
    uri = setup.uri()
    shared.open(uri, setup.paper)
    for line, character in [(0, 2), (1, 0), (4, 0), (11, 3)]:
        actions = await shared.code_actions(uri, (line, character))
        assert not [a for a in actions if a.title == "Review this paragraph"], (line, character)
    assert setup.calls() == []


async def test_review_this_paragraph_action_anywhere_in_a_paragraph_costs_no_model_call(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path, review={"trigger": "manual"})
    uri = setup.uri()
    shared.open(uri, setup.paper)
    for line, character in [
        (RESULTS_LINE, 0),
        (RESULTS_LINE, 10),
        (2, 5),
        (3, len(METHODS_2)),
        (DATA_LINE, 3),
    ]:
        actions = await shared.code_actions(uri, (line, character))
        review = [a for a in actions if a.title == "Review this paragraph"]
        assert len(review) == 1, (line, character)
        assert review[0].command is not None
        assert review[0].command.command == REVIEW_PARAGRAPH
        assert list(review[0].command.arguments or []) == [uri, line, character]
    assert setup.calls() == [] and setup.tokens == []

    command = review[0].command
    assert await shared.execute(command.command, *(command.arguments or [])) == {"reviewed": 1}
    assert markers_reviewed(setup) == [M_DATA]


async def test_save_trigger_reviews_on_save_and_not_on_open(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path, review={"trigger": "save", "severity": "hint"})
    uri = setup.uri()
    shared.open(uri, setup.paper)
    await shared.published_version(uri, 1)
    await shared.barrier(uri)
    await shared.barrier(uri)
    assert setup.calls() == [] and setup.tokens == []

    saves_before = shared.saves_sent
    shared.save(uri)
    shown = await shared.published_findings(uri, 3)
    (token,) = await setup.finished(1)
    assert shared.saves_before_token[token] == saves_before + 1  # the review began after the save
    assert {d.severity for d in shown} == {types.DiagnosticSeverity.Hint}
    assert len(setup.calls()) == REVIEWABLE_IN_PAPER


# -- cancellation ------------------------------------------------------------------------------------------------


async def cancel_hanging_reviews(setup: Setup) -> types.ProgressToken:
    """Open the paper with every reviewer request hanging, cancel the progress once all three are in flight,
    and wait until the requests are disconnected and the progress has ended."""
    client = setup.client
    setup.reviewer.hang = {M_METHODS, M_RESULTS, M_DATA}
    uri = setup.uri()
    client.open(uri, setup.paper)
    await eventually(lambda: len(setup.calls()) == 3, "three reviewer requests in flight")
    await client.wait_until(
        lambda: bool(setup.tokens) and client.begun(setup.tokens[0]), "the progress to begin"
    )
    (token,) = setup.tokens
    assert not client.ended(token)
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    await eventually(
        lambda: all(call.disconnected for call in setup.calls()), "the reviewer requests to close"
    )
    await client.wait_until(lambda: client.ended(token), "the progress to end")
    return token


async def test_cancelling_the_progress_closes_the_model_requests_and_publishes_nothing(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    await cancel_hanging_reviews(setup)
    uri = setup.uri()
    await shared.barrier(uri)
    assert shared.ever_published(uri) == []
    assert len(setup.calls()) == 3
    hover = await shared.hover_text(uri, RESULTS_LINE, 3)  # the server keeps answering
    assert hover is not None and "Flesch-Kincaid" in hover


async def test_a_cancelled_progress_does_not_claim_the_paragraphs_were_reviewed(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    token = await cancel_hanging_reviews(setup)
    end = shared.progress(token)[-1]
    assert isinstance(end, types.WorkDoneProgressEnd)
    assert end.message != "Reviewed 3/3 paragraphs"


async def test_editing_a_paragraph_cancels_its_review_and_its_old_result_is_never_published(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    setup.reviewer.hang = {M_RESULTS}
    uri = setup.uri()
    shared.open(uri, setup.paper)
    await shared.published_findings(uri, 2)  # methods' two findings; results' review hangs
    await eventually(lambda: len(setup.calls(M_RESULTS)) == 1, "the results paragraph's review in flight")
    (old_request,) = setup.calls(M_RESULTS)

    column = RESULTS.index("wide")
    shared.edit(uri, 2, (RESULTS_LINE, column), (RESULTS_LINE, column + 4), "large")
    await eventually(lambda: old_request.disconnected, "the edited paragraph's model request to close")
    await setup.finished(1)
    assert [d for d in shared.ever_published(uri) if d.code == COMPARISON] == []

    # The new text is reviewed on save, and only it.
    setup.reviewer.hang = set()
    shared.save(uri)
    shown = by_code(await shared.published_findings(uri, 3))
    await setup.finished(2)
    (new_request,) = [c for c in setup.calls(M_RESULTS) if c is not old_request]
    assert "a large margin" in reviewed_paragraph(new_request)
    assert span(shown[COMPARISON]) == source_span(setup.paper.replace("wide", "large"), Q_OUTPERFORMS)
    assert len(setup.calls()) == 4


# -- findings follow their text --------------------------------------------------------------------------------


PREFACE = "Short preface.\n\n\n"  # three more lines above everything; a paragraph too short to review


async def open_fast_and_insert_preface(setup: Setup) -> tuple[list[types.Diagnostic], list[types.Diagnostic]]:
    """Open the paper (fast mode), then insert three lines at the top: the findings before and after."""
    client, uri = setup.client, setup.uri()
    client.open(uri, setup.paper)
    before = await client.published_findings(uri, 3)
    await setup.finished(1)
    client.edit(uri, 2, (0, 0), (0, 0), PREFACE)
    after = findings(await client.published_version(uri, 2))
    return before, after


async def test_findings_keep_their_text_when_lines_are_inserted_above_without_model_calls(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path, review={"mode": "fast"})
    before, after = await open_fast_and_insert_preface(setup)
    assert {str(d.code): shifted(span(d), 3) for d in before} == {str(d.code): span(d) for d in after}
    assert all(d.related_information for d in after)  # fast mode: the retrieved passages
    shared.save(setup.uri())
    await shared.barrier(setup.uri())
    await shared.barrier(setup.uri())
    assert len(setup.calls()) == 3 and len(setup.tokens) == 1


async def test_a_finding_stays_on_its_quote_when_white_space_before_it_changes(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    uri = setup.uri()
    shared.open(uri, setup.paper)
    await shared.published_findings(uri, 3)
    await setup.finished(1)
    shared.edit(uri, 2, (RESULTS_LINE, 3), (RESULTS_LINE, 3), " ")  # "Our  approach outperforms ..."
    edited = setup.paper.replace("Our approach", "Our  approach")
    shown = by_code(findings(await shared.published_version(uri, 2)))
    assert span(shown[COMPARISON]) == source_span(edited, Q_OUTPERFORMS)


async def test_evidence_locations_keep_their_text_when_lines_are_inserted_above(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path, review={"mode": "fast"})
    before, after = await open_fast_and_insert_preface(setup)

    def locations(diagnostics: list[types.Diagnostic]) -> dict[str, list[Span]]:
        return {
            str(d.code): [span(info.location.range) for info in d.related_information or []]
            for d in diagnostics
        }

    moved = {code: [shifted(where, 3) for where in spans] for code, spans in locations(before).items()}
    assert moved == locations(after)


# -- scheduling ----------------------------------------------------------------------------------------------------


async def test_a_requested_review_goes_ahead_of_queued_background_reviews(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    short_finding = {"quote": "note is short", "label": SUBSTANCE, "review": "Say more.", "reasoning": "-"}
    setup = prepare(
        shared, endpoints, tmp_path, {**PAPER_FINDINGS, M_SHORT: [short_finding]}, llm={"maxConcurrency": 1}
    )
    setup.reviewer.gated = {M_METHODS, M_RESULTS, M_DATA}
    uri = setup.uri()
    shared.open(uri, setup.paper)
    await eventually(lambda: len(setup.calls()) == 1, "the first background review in flight")

    # The short paragraph is not reviewed in the background; the user asks for it.
    command = asyncio.ensure_future(shared.execute(REVIEW_PARAGRAPH, uri, SHORT_LINE, 2))
    await shared.wait_until(lambda: len(setup.tokens) == 2 and shared.begun(setup.tokens[1]), "its progress")
    await shared.barrier(uri)
    assert len(setup.calls()) == 1  # one request at a time
    setup.endpoint.gate.set()
    assert await command == {"reviewed": 1}
    await setup.finished(2)
    order = markers_reviewed(setup)
    assert order[1] == M_SHORT, order  # next after the request in flight, ahead of the two queued
    assert sorted(order) == sorted([M_METHODS, M_RESULTS, M_DATA, M_SHORT])
    assert setup.endpoint.max_in_flight == 1


async def test_paragraph_reviews_run_concurrently_up_to_max_concurrency(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    count, limit = 8, 3
    scripts = {f"topic number {n} ": [] for n in range(count)}
    setup = prepare(shared, endpoints, tmp_path, scripts, llm={"maxConcurrency": limit})
    setup.reviewer.gated = set(scripts)
    text = "\n\n".join(
        f"In this paragraph we discuss topic number {n} of the study, giving enough words for a review to run "
        f"on it, namely the setting, the measurements, and the conclusions that follow ({setup.tag})."
        for n in range(count)
    )
    uri = setup.uri()
    shared.open(uri, text + "\n")
    await eventually(lambda: setup.endpoint.in_flight == limit, f"{limit} requests in flight")
    await shared.barrier(uri)
    assert len(setup.calls()) == limit
    setup.endpoint.gate.set()
    (token,) = await setup.finished(1)
    assert len(setup.calls()) == count
    assert setup.endpoint.max_in_flight == limit
    end = shared.progress(token)[-1]
    assert (
        isinstance(end, types.WorkDoneProgressEnd) and end.message == f"Reviewed {count}/{count} paragraphs"
    )


# -- what the model gets wrong ---------------------------------------------------------------------------------


async def test_hallucinated_quotes_never_become_diagnostics(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    invented = {
        "quote": "trained on a public benchmark of radiology reports",
        "label": SOUNDNESS,
        "review": "Radiology reports differ from notes.",
        "reasoning": "-",
    }
    also_invented = {
        "quote": "we release all code and data",
        "label": REPLICABILITY,
        "review": "Good.",
        "reasoning": "-",
    }
    scripts = {M_METHODS: [F_PRIVATE, invented], M_RESULTS: [also_invented], M_DATA: []}
    setup = prepare(shared, endpoints, tmp_path, scripts)
    uri = setup.uri()
    shared.open(uri, setup.paper)
    await setup.finished(1)
    await shared.barrier(uri)
    (shown,) = findings(shared.latest(uri))
    assert shown.code == REPLICABILITY and span(shown) == source_span(setup.paper, Q_PRIVATE)
    assert {str(d.code) for d in shared.ever_published(uri)} == {REPLICABILITY}
    # Each paragraph with an unusable quote got exactly one repair request, which said what was wrong.
    assert (
        len(setup.calls(M_METHODS)) == 2
        and len(setup.calls(M_RESULTS)) == 2
        and len(setup.calls(M_DATA)) == 1
    )
    assert "is not in the paragraph" in setup.calls(M_METHODS)[1].prompt


async def test_a_quote_that_contradicts_the_paragraph_is_not_shown(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    invented = {
        "quote": "the improvement over the baseline is not statistically significant",
        "label": SOUNDNESS,
        "review": "Without significance the claim of improvement does not stand.",
        "reasoning": "-",
    }
    setup = prepare(shared, endpoints, tmp_path, {"ten epochs": [invented]})
    text = (
        "We trained the network for ten epochs on the training set and observed that the improvement over the "
        f"baseline is statistically significant across all five benchmark datasets, reported in full ({setup.tag})."
    )
    uri = setup.uri()
    shared.open(uri, text + "\n")
    await setup.finished(1)
    await shared.barrier(uri)
    assert findings(shared.latest(uri)) == []


async def test_a_dead_endpoint_is_said_once_and_not_tried_again_until_asked(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path, dead_url: str
) -> None:
    setup = prepare(shared, endpoints, tmp_path, endpoint_url=dead_url)
    uri = setup.uri()
    said = len(shared.messages)

    def stopped() -> list[types.ShowMessageParams]:
        return [m for m in shared.messages[said:] if dead_url in m.message]

    shared.open(uri, setup.paper)
    await setup.finished(1)
    await shared.wait_until(lambda: bool(stopped()), "a message naming the dead endpoint")
    await shared.barrier(uri)
    (message,) = stopped()  # one message for the whole document, not one per paragraph
    assert message.type == types.MessageType.Error and "focused feedback stopped" in message.message
    assert shared.ever_published(uri) == []
    assert dead_url in (await shared.execute(STATUS))["problem"]

    # Saving does not knock on the dead endpoint again, paragraph after paragraph: no review runs.
    tokens = len(shared.created_tokens)
    shared.save(uri)
    await asyncio.sleep(0.5)
    await shared.barrier(uri)
    assert len(shared.created_tokens) == tokens and len(stopped()) == 1

    # Readability and hovers carry on; a command the user runs tries the endpoint again, and says so again.
    hover = await shared.hover_text(uri, RESULTS_LINE, 3)
    assert hover is not None and "Flesch-Kincaid" in hover
    assert await shared.execute(REVIEW_DOCUMENT, uri) == {"reviewed": 0}  # reviewed means reviewed
    assert len(stopped()) == 2


async def test_a_failed_review_is_tried_again_on_the_next_save(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    setup.reviewer.failing = {M_METHODS, M_RESULTS, M_DATA}
    uri = setup.uri()
    shared.open(uri, setup.paper)
    await setup.finished(1)
    assert len(setup.calls()) == 3 and shared.ever_published(uri) == []

    setup.reviewer.failing = set()  # the endpoint is back
    shared.save(uri)
    await setup.finished(2, timeout=SHORT_WAIT)
    await shared.published_findings(uri, 3)


async def test_review_document_leaves_out_paragraphs_below_min_words(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path, review={"trigger": "manual"})
    uri = setup.uri()
    shared.open(uri, setup.paper)
    await shared.published_version(uri, 1)
    result = await shared.execute(REVIEW_DOCUMENT, uri)
    assert setup.calls(M_SHORT) == []
    assert result == {"reviewed": REVIEWABLE_IN_PAPER}


# -- full mode: evidence -----------------------------------------------------------------------------------------

QUESTION = "How many patients does the evaluation corpus of clinical notes contain?"
ANSWER = "Notes from twelve thousand patients admitted between 2015 and 2019."


def plan_reply(request: RecordedRequest) -> Reply:
    return Reply(json={"steps": [{"action": "paper_question", "question": QUESTION}, {"action": "review"}]})


def controller_reply(request: RecordedRequest) -> Reply:
    return Reply(
        json={"explanation": "The corpus size matters.", "action": "paper_question", "question": QUESTION}
    )


def investigator_reply(request: RecordedRequest) -> Reply:
    """Cite the passage about the corpus when it is among those given; otherwise say so."""
    for line in request.prompt.splitlines():
        if line.startswith("[") and M_DATA in line:
            number = int(line[1 : line.index("]")])
            return Reply(json={"answerable": True, "answer": ANSWER, "passages": [number]})
    return Reply(json={"answerable": False, "answer": "I don't know"})


async def test_full_mode_links_the_evidence_and_hover_shows_questions_and_answers(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    rules = [
        Rule(role="planner", respond=plan_reply),
        Rule(role="controller", respond=controller_reply),
        Rule(role="investigator", respond=investigator_reply),
    ]
    setup = prepare(shared, endpoints, tmp_path, review={"mode": "full"}, rules=rules)
    uri, text = setup.uri(), setup.paper
    shared.open(uri, text)
    shown = by_code(await shared.published_findings(uri, 3))
    await setup.finished(1)

    comparison = shown[COMPARISON]
    data_line = text.splitlines()[DATA_LINE]
    evidence = [
        info
        for info in comparison.related_information or []
        if span(info.location.range) == ((DATA_LINE, 0), (DATA_LINE, len(data_line)))
    ]
    assert len(evidence) == 1, comparison.related_information
    assert evidence[0].location.uri == uri
    assert evidence[0].message == f"Evidence for “{QUESTION}”: {ANSWER}"

    (line, start), _ = source_span(text, Q_OUTPERFORMS)
    hover = await shared.hover_text(uri, line, start + 3)
    assert hover is not None
    assert f"*Reasoning:* {F_OUTPERFORMS['reasoning']}" in hover
    assert "*Evidence gathered:*" in hover
    assert f"- (paper) **{QUESTION}** {ANSWER}" in hover

    # The whole agent loop ran: three candidate plans per paragraph (the first settles the structured-output
    # mode, then one request with n asks for the rest), a controller step, the investigator.
    assert sum(request.n for request in setup.endpoint.calls("planner")) == 3 * REVIEWABLE_IN_PAPER
    assert len(setup.endpoint.calls("controller")) == REVIEWABLE_IN_PAPER
    assert 1 <= len(setup.endpoint.calls("investigator")) <= REVIEWABLE_IN_PAPER
    assert len(setup.calls()) == REVIEWABLE_IN_PAPER
    assert ANSWER in setup.calls(M_RESULTS)[0].prompt  # the reviewer read the answer


# -- dismissing --------------------------------------------------------------------------------------------------


def add_workspace_folder(client: ReviewClient, folder: Path) -> None:
    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)], removed=[]
            )
        )
    )


def dismissal_key(diagnostic: types.Diagnostic) -> str:
    assert isinstance(diagnostic.data, dict)
    return str(diagnostic.data["dismissal"])


async def test_dismissed_finding_disappears_and_stays_dismissed_after_edits_and_a_restart(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    add_workspace_folder(shared, tmp_path)
    (tmp_path / "sections").mkdir()
    uri = setup.uri("sections/paper.md")
    shared.open(uri, setup.paper)
    comparison = by_code(await shared.published_findings(uri, 3))[COMPARISON]
    await setup.finished(1)

    key = dismissal_key(comparison)
    assert await shared.execute(DISMISS_FINDING, uri, key) == {"dismissed": True}
    assert set(by_code(await shared.published_findings(uri, 2))) == {REPLICABILITY, SOUNDNESS}
    stored = tmp_path / ".margin" / "dismissed.json"  # in the workspace folder, not beside the document
    assert stored.is_file() and not (tmp_path / "sections" / ".margin").exists()
    (entry,) = json.loads(stored.read_text())["dismissed"]
    assert entry["key"] == key and entry["label"] == COMPARISON and entry["quote"] == Q_OUTPERFORMS
    assert await shared.execute(DISMISS_FINDING, uri, key) == {"dismissed": False}  # nothing left to dismiss

    # An edit elsewhere (two lines above everything) moves the other findings; the dismissed one stays away.
    shared.edit(uri, 2, (0, 0), (0, 0), "Preface.\n\n")
    after_edit = by_code(findings(await shared.published_version(uri, 2)))
    assert set(after_edit) == {REPLICABILITY, SOUNDNESS}
    (line, start), _ = shifted(source_span(setup.paper, Q_OUTPERFORMS), 2)
    hover = await shared.hover_text(uri, line, start + 3)
    assert hover is not None and COMPARISON not in hover
    edited = "Preface.\n\n" + setup.paper

    # A new server (same workspace, same cache): still dismissed, and no model call to find that out.
    calls_before = len(setup.calls())
    async with review_server(tmp_path, setup.endpoint.base_url) as restarted:
        restarted.open(uri, edited)
        await restarted.reviews_finished(1)
        await restarted.barrier(uri)
        assert set(by_code(findings(restarted.latest(uri)))) == {REPLICABILITY, SOUNDNESS}
        assert COMPARISON not in {str(d.code) for d in restarted.ever_published(uri)}
    assert len(setup.calls()) == calls_before


async def test_dismiss_this_finding_is_a_quick_fix_on_a_finding(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    setup = prepare(shared, endpoints, tmp_path)
    uri = setup.uri()
    shared.open(uri, setup.paper)
    comparison = by_code(await shared.published_findings(uri, 3))[COMPARISON]
    await setup.finished(1)
    calls = len(setup.calls())
    actions = await shared.code_actions(uri, (0, 0), [comparison])
    (dismiss,) = [a for a in actions if a.title.startswith("Dismiss this finding")]
    assert dismiss.title == f"Dismiss this finding ({COMPARISON})"
    assert dismiss.kind == types.CodeActionKind.QuickFix
    assert dismiss.command is not None and dismiss.command.command == DISMISS_FINDING
    assert list(dismiss.command.arguments or []) == [uri, dismissal_key(comparison)]
    assert len(setup.calls()) == calls
    assert await shared.execute(dismiss.command.command, *(dismiss.command.arguments or [])) == {
        "dismissed": True
    }
    assert COMPARISON not in by_code(await shared.published_findings(uri, 2))


async def test_dismissals_go_to_the_root_uri_when_the_client_sends_no_workspace_folders(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint]
) -> None:
    root = shared.shared_root
    assert root is not None
    folder = root / "rooted"
    (folder / "sections").mkdir(parents=True)
    setup = prepare(shared, endpoints, folder)
    uri = setup.uri("sections/paper.md")
    shared.open(uri, setup.paper)
    comparison = by_code(await shared.published_findings(uri, 3))[COMPARISON]
    assert await shared.execute(DISMISS_FINDING, uri, dismissal_key(comparison)) == {"dismissed": True}
    assert (root / ".margin" / "dismissed.json").is_file()


# -- pull clients (Neovim) ---------------------------------------------------------------------------------------


async def test_neovim_is_asked_to_pull_again_and_the_pull_has_the_findings(
    endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    reviewer = Reviewer(PAPER_FINDINGS)
    endpoint = endpoints(Rule(role="reviewer", respond=reviewer))
    uri = (tmp_path / "paper.md").as_uri()
    async with review_server(
        tmp_path, endpoint.base_url, capabilities=neovim(refresh_support=True)
    ) as client:
        client.open(uri, paper(tag_for(tmp_path)))
        assert findings(await client.pull(uri)) == []
        await client.reviews_finished(1)
        await client.wait_until(lambda: client.diagnostic_refresh_count >= 1, "workspace/diagnostic/refresh")
        pulled = by_code(await client.pull(uri))
        assert set(pulled) == {REPLICABILITY, SOUNDNESS, COMPARISON}
        assert pulled[COMPARISON].severity == types.DiagnosticSeverity.Warning

        refreshes = client.diagnostic_refresh_count
        assert await client.execute(DISMISS_FINDING, uri, dismissal_key(pulled[COMPARISON])) == {
            "dismissed": True
        }
        await client.wait_until(lambda: client.diagnostic_refresh_count > refreshes, "another refresh")
        assert set(by_code(await client.pull(uri))) == {REPLICABILITY, SOUNDNESS}
        assert client.published == []  # a pulling client is never pushed to


async def test_neovim_without_refresh_support_still_learns_of_new_findings(
    endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    endpoint = endpoints(Rule(role="reviewer", respond=Reviewer(PAPER_FINDINGS)))
    uri = (tmp_path / "paper.md").as_uri()
    async with review_server(
        tmp_path, endpoint.base_url, capabilities=neovim(refresh_support=False)
    ) as client:
        client.open(uri, paper(tag_for(tmp_path)))
        await client.pull(uri)
        await client.reviews_finished(1)
        await client.barrier(uri)
        # It cannot be asked to pull again, so the findings are pushed to it; the pull keeps readability only,
        # or Neovim would show each finding twice (it keeps pushed and pulled diagnostics apart).
        latest = [params for params in client.published if params.uri == uri][-1]
        assert len(findings(latest.diagnostics)) == 3
        assert by_code(await client.pull(uri)) == {}


# -- several folders ---------------------------------------------------------------------------------------------


async def test_folders_with_different_endpoints_do_not_cancel_each_others_reviews(
    shared: ReviewClient, endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    first = prepare(shared, endpoints, tmp_path / "a")
    first.reviewer.gated = {M_RESULTS}
    first_uri = first.uri()
    shared.open(first_uri, f"{RESULTS} Ref {first.tag}.\n")
    await eventually(lambda: len(first.calls()) == 1, "the first folder's review in flight")

    second = prepare(shared, endpoints, tmp_path / "b")
    second.tokens_before = first.tokens_before
    second_uri = second.uri()
    shared.open(second_uri, f"{METHODS_1}\n{METHODS_2} Ref {second.tag}.\n")
    await shared.published_findings(second_uri, 2)

    first.endpoint.gate.set()
    await first.finished(2)
    await shared.barrier(first_uri)
    assert [d.code for d in findings(shared.latest(first_uri))] == [COMPARISON]
