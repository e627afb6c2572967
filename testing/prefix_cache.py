"""What vLLM's automatic prefix caching would reuse of the requests an endpoint saw.

vLLM keeps the KV cache of prompts in blocks of 16 tokens, each block found by a hash chained with the hash of
the block before it: a request reuses the leading full blocks that some earlier request also had, from its first
token. Here the chat template is a role marker before each message and tokens are whitespace-separated words
(the unit the scripted endpoint counts prompt tokens in), so shares are close to, not equal to, a real
tokenizer's. Eviction is ignored: the figure is what a cache large enough for the run would reuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

BLOCK_TOKENS = 16  # vLLM's default block size


@dataclass(frozen=True, slots=True)
class Reuse:
    total: int = 0  # prompt tokens
    reused: int = 0  # of them, in blocks an earlier request already had

    @property
    def share(self) -> float:
        return self.reused / self.total if self.total else 0.0

    def __add__(self, other: Reuse) -> Reuse:
        return Reuse(self.total + other.total, self.reused + other.reused)


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    overall: Reuse = field(default_factory=Reuse)
    by_role: dict[str, Reuse] = field(default_factory=dict)

    @property
    def share(self) -> float:
        return self.overall.share


def prompt_tokens(messages: Sequence[dict[str, Any]]) -> list[str]:
    """A request's prompt as a chat template renders it: each message's role marker, then its words."""
    tokens: list[str] = []
    for message in messages:
        tokens.append(f"<|{message.get('role', '')}|>")
        tokens.extend(str(message.get("content", "")).split())
    return tokens


def prefix_reuse(
    requests: Iterable[tuple[str | None, Sequence[dict[str, Any]]]], block_tokens: int = BLOCK_TOKENS
) -> PrefixReuse:
    """The share of prompt tokens in leading blocks an earlier request had, over (role, messages) pairs in
    the order the server received them."""
    seen: set[int] = set()
    overall = Reuse()
    by_role: dict[str, Reuse] = {}
    for role, messages in requests:
        tokens = prompt_tokens(messages)
        parent = 0
        reused = 0
        sharing = True
        for start in range(0, len(tokens) - block_tokens + 1, block_tokens):
            parent = hash((parent, tuple(tokens[start : start + block_tokens])))
            if sharing and parent in seen:
                reused += block_tokens
            else:
                sharing = False
                seen.add(parent)
        this = Reuse(len(tokens), reused)
        overall += this
        name = role or "(none)"
        by_role[name] = by_role.get(name, Reuse()) + this
    return PrefixReuse(overall, by_role)
