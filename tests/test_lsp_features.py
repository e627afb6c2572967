"""The shape of the editor side: a feature is one module plus one line (features/__init__.py), and the LSP
methods it answers are registered because it implements their hooks. Shown with the paragraph-grade inlay hints
(features/grades.py) through the real server over stdio, in the VS Code and Neovim profiles."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from margin.server.features import FEATURES, Feature
from margin.server.lsp import MarginServer
from margin.workflows.manuscript.source import path_to_uri

from conftest import FIXTURES, LSP_WAIT, SERVER_COMMAND, stop_session

WAIT = LSP_WAIT
PAPER = FIXTURES / "markdown" / "paper.md"
PROFILES = ("visual-studio-code", "neovim@v0.11")
MANUAL = {"margin": {"review": {"trigger": "manual"}}}  # no model call in these tests
_GRADE = re.compile(r"\| (-?\d+\.\d) \| (-?\d+\.\d) \| (-?\d+\.\d) \|")


@contextlib.asynccontextmanager
async def server(
    capabilities: types.ClientCapabilities, settings: Any = None
) -> AsyncIterator[LanguageClient]:
    client = await ClientServerConfig(server_command=SERVER_COMMAND).start()
    refreshes: list[None] = []
    client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)(lambda params: refreshes.append(params))
    client.inlay_refreshes = refreshes  # type: ignore[attr-defined]
    try:
        result = await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(capabilities=capabilities, initialization_options=settings)
            ),
            WAIT,
        )
        client.initialize_result = result  # type: ignore[attr-defined]
        yield client
    finally:
        await stop_session(client)


def open_paper(client: LanguageClient) -> tuple[str, str]:
    text = PAPER.read_text(encoding="utf-8")
    uri = path_to_uri(PAPER)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=text)
        )
    )
    return uri, text


async def inlay_hints(client: LanguageClient, uri: str, lines: int) -> list[types.InlayHint]:
    whole = types.Range(
        start=types.Position(line=0, character=0), end=types.Position(line=lines, character=0)
    )
    hints = await asyncio.wait_for(
        client.text_document_inlay_hint_async(
            types.InlayHintParams(text_document=types.TextDocumentIdentifier(uri=uri), range=whole)
        ),
        WAIT,
    )
    return list(hints or [])


async def hover_grade(client: LanguageClient, uri: str, position: types.Position) -> str:
    """The Flesch-Kincaid grade the readability hover shows for the paragraph at `position`."""
    hover = await asyncio.wait_for(
        client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)
        ),
        WAIT,
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    match = _GRADE.search(hover.contents.value)
    assert match is not None, hover.contents.value
    return match.group(1)


@pytest.mark.parametrize("profile", PROFILES)
async def test_each_paragraph_gets_its_grade_as_an_inlay_hint_when_the_setting_is_on(profile: str) -> None:
    settings = {"margin": {"readability": {"gradeHints": True}, "review": {"trigger": "manual"}}}
    async with server(client_capabilities(profile), settings) as client:
        assert client.initialize_result.capabilities.inlay_hint_provider  # type: ignore[attr-defined]
        uri, text = open_paper(client)
        hints = await inlay_hints(client, uri, text.count("\n") + 1)
        assert len(hints) >= 3  # the paper's long paragraphs
        lines = text.splitlines()
        for hint in hints:
            assert isinstance(hint.label, str) and hint.label.startswith("grade ")
            # At the end of a paragraph: nothing follows the hint on its line.
            assert hint.position.character == len(lines[hint.position.line].rstrip("\r\n")), hint
            # The same number the readability hover shows for that paragraph.
            inside = types.Position(line=hint.position.line, character=hint.position.character // 2)
            assert hint.label == f"grade {await hover_grade(client, uri, inside)}"
            assert isinstance(hint.tooltip, str) and "Coleman-Liau" in hint.tooltip


@pytest.mark.parametrize("profile", PROFILES)
async def test_no_grades_by_default(profile: str) -> None:
    async with server(client_capabilities(profile), MANUAL) as client:
        uri, text = open_paper(client)
        assert await inlay_hints(client, uri, text.count("\n") + 1) == []


async def test_turning_the_setting_on_asks_the_client_for_hints_again() -> None:
    """A client that pushes settings (no workspace/configuration) and can refresh inlay hints."""
    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True)
        )
    )
    async with server(capabilities, MANUAL) as client:
        uri, text = open_paper(client)
        assert await inlay_hints(client, uri, text.count("\n") + 1) == []
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"margin": {"readability": {"gradeHints": True}, "review": {"trigger": "manual"}}}
            )
        )
        for _ in range(200):
            if client.inlay_refreshes:  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.05)
        assert client.inlay_refreshes  # type: ignore[attr-defined]
        assert len(await inlay_hints(client, uri, text.count("\n") + 1)) >= 3


class Lenses(Feature):
    """A feature added the way a new one is: a class with a hook, and its entry in the features list."""

    async def code_lenses(self, view: Any) -> list[types.CodeLens]:
        return []


def test_an_lsp_method_is_registered_exactly_when_a_feature_implements_its_hook() -> None:
    plain = MarginServer().protocol.fm.features
    assert types.TEXT_DOCUMENT_CODE_LENS not in plain  # no shipped feature has code lenses
    assert types.TEXT_DOCUMENT_INLAY_HINT in plain  # the paragraph grades
    extended = MarginServer((*FEATURES, Lenses)).protocol.fm.features
    assert types.TEXT_DOCUMENT_CODE_LENS in extended
    assert set(plain) <= set(extended)


class _Answers(Feature):
    """Answers every hover for the same range as the other feature."""

    label = "plain"

    async def hover(self, view: Any, position: Any) -> types.Hover:
        span = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=9))
        return types.Hover(contents=self.label, range=span)


class _Preferred(_Answers):
    label = "preferred"
    hover_precedence = 1


class _Wider(_Answers):
    label = "wider"
    hover_precedence = 5

    async def hover(self, view: Any, position: Any) -> types.Hover:
        span = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=1, character=0))
        return types.Hover(contents=self.label, range=span)


@pytest.mark.parametrize("order", [(_Answers, _Preferred, _Wider), (_Wider, _Preferred, _Answers)])
async def test_the_innermost_hover_wins_and_precedence_breaks_a_tie(
    order: tuple[type[Feature], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finding that quotes its whole paragraph has the paragraph's range: its hover (precedence 1) still wins
    over the readability hover, whatever the order of the features."""
    from margin.server import lsp

    server = MarginServer(order)

    async def view(uri: str) -> object:
        return object()

    monkeypatch.setattr(server.session, "view", view)
    params = types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri="file:///paper.md"),
        position=types.Position(line=0, character=3),
    )
    hover = await lsp.on_hover(server, params)
    assert hover is not None and hover.contents == "preferred"


def test_a_finding_outranks_readability_on_the_same_range() -> None:
    from margin.server.features.readability import Readability
    from margin.server.features.review import Review

    assert Review.hover_precedence > Readability.hover_precedence
