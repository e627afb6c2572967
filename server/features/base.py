"""What a feature is: one object with the hooks it uses. server/lsp.py calls every feature's hook for each LSP
event and request, and registers an LSP method only when some feature implements its hook, so a new feature is
its module plus one line in features/__init__.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from lsprotocol import types

    from margin.workflows.manuscript.source import Position

    from ..session import DocumentView, Session


@dataclass(frozen=True, slots=True)
class Command:
    """A workspace/executeCommand handler. pygls converts the arguments by the handler's annotations.
    `cancellable`: long work that $/cancelRequest of its request may stop."""

    handler: Callable[..., Awaitable[Any]]
    cancellable: bool = True


class Feature:
    # Diagnostics that arrive after background work (model findings) rather than with each edit: a pulling
    # client that cannot be asked to pull again gets them pushed.
    late_diagnostics: ClassVar[bool] = False
    # Which hover shows when two features answer for the same range (the higher wins).
    hover_precedence: ClassVar[int] = 0

    def __init__(self, session: Session) -> None:
        self.session = session

    # -- document and settings events ---------------------------------------------------------------------------

    async def opened(self, uri: str) -> None:
        """After the document's diagnostics were published."""

    async def changed(self, uri: str) -> None:
        """Before the document's new diagnostics are published."""

    async def saved(self, uri: str) -> None:
        """After the document's diagnostics were published."""

    def closed(self, uri: str) -> None:
        """The document was closed."""

    def settings_changed(self) -> None:
        """Settings may have changed (didChangeConfiguration); diagnostics are refreshed after this."""

    # -- answers (hooks a feature does not override are not asked, or not registered at all) ---------------------

    async def diagnostics(self, view: DocumentView) -> list[types.Diagnostic]:
        return []

    async def hover(self, view: DocumentView, position: Position) -> types.Hover | None:
        """A hover with its range: when several features answer, the innermost range wins."""
        return None

    async def code_actions(
        self, params: types.CodeActionParams, view: DocumentView | None
    ) -> list[types.CodeAction]:
        """Listing actions must cost no model call: the work runs when the user picks one (a command)."""
        return []

    async def inlay_hints(self, view: DocumentView, within: types.Range) -> list[types.InlayHint]:
        return []

    async def code_lenses(self, view: DocumentView) -> list[types.CodeLens]:
        return []

    def commands(self) -> Mapping[str, Command]:
        return {}

    def status(self) -> dict[str, Any]:
        """What this feature adds to the margin.status command (no network)."""
        return {}

    async def shutdown(self) -> None:
        """Stop background work; the session closes the LLM clients afterwards."""


def implements(feature: type[Feature], hook: str) -> bool:
    """Whether a feature class overrides a hook of Feature."""
    return getattr(feature, hook) is not getattr(Feature, hook)


def hover_extent(hover: types.Hover) -> tuple[int, int]:
    """How much text a hover is about (lines, then characters): the innermost answer is shown."""
    span = hover.range
    if span is None:
        return (2**31, 0)
    return (span.end.line - span.start.line, span.end.character - span.start.character)
