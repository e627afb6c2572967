"""The rewrites' options: the Society of Medical Simplifiers, AgentSimp and JRE-L.

The settings table (margin.server.settings) takes its defaults for these knobs from the dataclasses here, so this
module is imported by every command and by the server's start: it must import nothing but the standard library.
The pipelines (soms, agentsimp, jrel) re-export what they use from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Domain(StrEnum):
    """Who the Society of Medical Simplifiers writes for."""

    SCIENCE = "science"  # any field
    MEDICAL = "medical"  # the paper's setting


# The Society of Medical Simplifiers' interaction loops.
LAYPERSON, CLARIFIER, REDUNDANCY = "layperson", "clarifier", "redundancy"
LOOPS = (LAYPERSON, CLARIFIER, REDUNDANCY)


@dataclass
class SomsOptions:
    domain: Domain = Domain.SCIENCE  # MEDICAL (the paper's setting) or SCIENCE (any field)
    loop_limit: int = 2  # times each interaction loop may be entered (the paper: 2)
    clarifier_rounds: int = 3  # the clarifier revises rejected substitutions at most this often
    accuracy_rounds: int = 2  # the expert's accuracy check may send the rewrite back this often
    min_questions: int = 4  # the layperson asks at least this many questions (the paper: 4)
    loops: tuple[str, ...] = LOOPS  # the interaction loops that may run; (LAYPERSON,) is the paper's ablation


class Communication(StrEnum):
    """How AgentSimp's simplifier, metaphor analyst and terminology interpreter work together."""

    PIPELINE = "pipeline"  # one after the other
    SYNCHRONOUS = "synchronous"  # side by side, fused by the content integrator


class Combination(StrEnum):
    """How AgentSimp's article architect sees the document."""

    ITERATIVE = "iterative"  # overlapping chunks
    DIRECT = "direct"  # the whole document at once


@dataclass
class AgentSimpOptions:
    communication: Communication = Communication.PIPELINE  # or SYNCHRONOUS
    combination: Combination = Combination.ITERATIVE  # or DIRECT
    chunk_size: int = 2  # paragraphs per architect call in iterative combination (the paper: 2)
    supervisor_rounds: int = 1  # supervisor critiques, each followed by a revision
    proofread: bool = True
    # The paper's ablations: each of these agents can be left out.
    architect: bool = True
    metaphor_analyst: bool = True
    terminology_interpreter: bool = True
    document_words: int = 6_000  # how much of the manuscript the director and analyst read


class Keep(StrEnum):
    """Which version of JRE-L's lay article is kept."""

    LAST = "last"  # the paper
    MOST_READABLE = "mostReadable"  # lowest mean of FKGL, CLI, DCRS


@dataclass
class LayOptions:
    iterations: int = 3  # reading-editing-revising rounds after the first draft (the paper: 3)
    keep: Keep = Keep.LAST  # LAST (the paper) or MOST_READABLE (lowest mean of FKGL, CLI, DCRS)
    paper_words: int = 1_500  # how much of the paper the journalist and editor read
    # The paper's ablations (its Table 3): "no_reader" (the editor advises from the article alone),
    # "no_editor" (the journalist revises from the reader's notes: "-Suggestions"), "no_collaboration" (the
    # journalist revises its own draft with no input); "" runs the whole loop.
    ablation: str = ""


__all__ = [
    "CLARIFIER",
    "LAYPERSON",
    "LOOPS",
    "REDUNDANCY",
    "AgentSimpOptions",
    "Combination",
    "Communication",
    "Domain",
    "Keep",
    "LayOptions",
    "SomsOptions",
]
