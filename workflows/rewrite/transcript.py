"""The full agent conversation of a run, as JSON: users of these methods want to see the loop."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .output import create_beside


@dataclass
class Turn:
    role: str
    step: str
    messages: list[dict[str, str]]
    output: str
    model: str = ""
    cached: bool = False
    failure: str | None = None
    seconds: float = 0.0


@dataclass
class Transcript:
    method: str
    settings: dict[str, Any] = field(default_factory=dict)
    turns: list[Turn] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # decisions the pipeline took (fallbacks, refusals)
    started: float = field(default_factory=time.time)

    def record(self, turn: Turn) -> None:
        self.turns.append(turn)

    def note(self, message: str) -> None:
        self.notes.append(message)

    def models(self) -> dict[str, str]:
        """The model each role used (the last one that answered it)."""
        return {turn.role: turn.model for turn in self.turns if turn.model}

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "started": datetime.fromtimestamp(self.started, UTC).isoformat(timespec="seconds"),
            "settings": self.settings,
            "models": self.models(),
            "notes": self.notes,
            "turns": [
                {
                    "role": turn.role,
                    "step": turn.step,
                    "model": turn.model,
                    "cached": turn.cached,
                    "seconds": round(turn.seconds, 3),
                    "failure": turn.failure,
                    "messages": turn.messages,
                    "output": turn.output,
                }
                for turn in self.turns
            ],
        }

    def text(self) -> str:
        """The transcript as the JSON text that is saved (the CLI's --transcript and `save` alike)."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    def save(self, folder: Path, stem: str) -> Path:
        """Write the transcript as a new JSON file in `folder` (never over an existing one, atomically, never
        through a link: output.create_beside); return its path."""
        stamp = datetime.fromtimestamp(self.started, UTC).strftime("%Y%m%dT%H%M%SZ")
        return create_beside(folder / f"{stem}-{self.method}-{stamp}.json", self.text())
