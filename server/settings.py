"""margin's settings: one declarative table that the server, the CLI, the README and editor clients share.

Values arrive under the section `margin`, nested ({"readability": {"threshold": 18}}) or dotted
({"readability.threshold": 18}), from initializationOptions or workspace/configuration. A bad value never
stops the server: it is reported by name and the default is used.

The pipeline knobs take their defaults from the pipelines' option dataclasses (ReviewOptions, SomsOptions,
AgentSimpOptions, LayOptions, in light modules of their own) and the model knobs from the LLM layer's
configuration: each default is written once, where it is used. Code reads the values typed, by section
(`settings.review.trigger`, `settings.simplify.loop_limit`): the sections are generated from this table into
server/settings_sections.py by `python -m margin.server.settings --write-sections`.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only the LLM layer's plain configuration types and the pipelines' option dataclasses, from light modules: the
# pipelines themselves are imported where they run, so that reading settings (every command, the server's start)
# imports neither the pipelines nor the OpenAI client.
from margin.workflows.feedback.options import ReviewOptions
from margin.workflows.feedback.types import Mode
from margin.workflows.llm.config import AUTO, EndpointConfig, LLMConfig, RoleRoute, split_urls
from margin.workflows.llm.types import StructuredMode
from margin.workflows.registry import ROLES, SIMPLIFY_METHODS, SOMS
from margin.workflows.rewrite.options import (
    LAYPERSON,
    LOOPS,
    AgentSimpOptions,
    Combination,
    Communication,
    Domain,
    Keep,
    LayOptions,
    SomsOptions,
)

if TYPE_CHECKING:
    from margin.server.settings_sections import (
        CacheSettings,
        GeneralSettings,
        LaySettings,
        LLMSettings,
        LogLevel,
        ReadabilitySettings,
        ReviewSettings,
        RewriteSettings,
        ServerSettings,
        SettingsSections,
        SimplifySettings,
    )
    from margin.workflows.feedback.literature import WebSearch
    from margin.workflows.feedback.scholarly import ScholarlySearch

SECTION = "margin"


@dataclass(frozen=True, slots=True)
class SettingSpec:
    key: str
    kind: (
        # "boolean" | "number" | "integer" | "string" | "list" (of strings) | "object" (per-role routes)
        # | "endpoint" (one URL, or a list of replicas' URLs)
        str
    )
    default: Any
    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    # Only the user, never a workspace, may set it: it decides where the manuscript, the API key or queries go,
    # or which files outside the workspace are read or written.
    user_only: bool = False

    def full_description(self) -> str:
        return self.description + (
            " User settings only: a workspace's value is ignored." if self.user_only else ""
        )

    def validate(self, value: Any) -> tuple[Any, str | None]:
        """The value to use, and a message when `value` had to be replaced by the default."""
        expected = self._expected()
        if self.kind == "boolean":
            if isinstance(value, bool):
                return value, None
        elif self.kind in ("number", "integer"):
            number_ok = isinstance(value, int | float) and not isinstance(value, bool)
            if number_ok and (self.kind == "number" or float(value).is_integer()):
                in_range = (self.minimum is None or value >= self.minimum) and (
                    self.maximum is None or value <= self.maximum
                )
                if in_range:
                    return (int(value) if self.kind == "integer" else float(value)), None
        elif (
            self.kind == "string"
            and isinstance(value, str)
            and (self.choices is None or value in self.choices)
        ):
            return value, None
        elif self.kind == "list" and isinstance(value, list) and all(isinstance(item, str) for item in value):
            return list(value), None
        elif self.kind == "endpoint" and _endpoint_problem(value) is None:
            return (value if isinstance(value, str) else list(value)), None
        elif self.kind == "object" and isinstance(value, Mapping):
            routes, problem = _role_routes(value)
            if problem is None:
                return routes, None
            return (
                self.default,
                f"Setting {SECTION}.{self.key}: {problem}. Using the default, {self.default!r}.",
            )
        return self.default, (
            f"Setting {SECTION}.{self.key} must be {expected}; got {value!r}. Using the default, {self.default!r}."
        )

    def _expected(self) -> str:
        if self.choices:
            return "one of " + ", ".join(repr(choice) for choice in self.choices)
        if self.kind in ("number", "integer"):
            noun = "a whole number" if self.kind == "integer" else "a number"
            if self.minimum is not None and self.maximum is not None:
                return f"{noun} from {self.minimum:g} to {self.maximum:g}"
            return noun
        if self.kind == "object":
            return "an object mapping agent roles to {endpoint, model, apiKeyEnv, temperature, topP, frequencyPenalty}"
        if self.kind == "list":
            return "a list of strings"
        if self.kind == "endpoint":
            return 'a URL, "auto", or a list of URLs (replicas of one model)'
        return "true or false" if self.kind == "boolean" else "a string"


_ROUTE_TEXT_KEYS = ("endpoint", "model", "apiKeyEnv")
# Sampling a role may have of its own (over its pipeline's defaults from the paper), with the range each takes.
_ROUTE_NUMBER_KEYS = {"temperature": (0.0, 2.0), "topP": (0.0, 1.0), "frequencyPenalty": (-2.0, 2.0)}
_ROUTE_KEYS = (*_ROUTE_TEXT_KEYS, *_ROUTE_NUMBER_KEYS)


def _endpoint_problem(value: Any) -> str | None:
    """What is wrong with an endpoint setting: one string, or a non-empty list of URLs (no "auto" among them)."""
    if isinstance(value, str):
        return None
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        return "must be a string or a non-empty list of URLs"
    if AUTO in value:
        return f'lists "{AUTO}" among replicas; a list names servers by URL'
    return None


def _role_routes(value: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], str | None]:
    routes: dict[str, dict[str, Any]] = {}
    for role, route in value.items():
        if role not in ROLES:
            return {}, f"unknown agent role {role!r} (known: {', '.join(ROLES)})"
        if not isinstance(route, Mapping) or any(key not in _ROUTE_KEYS for key in route):
            return {}, f"the route for {role!r} must be an object with some of {', '.join(_ROUTE_KEYS)}"
        if any(
            not isinstance(route[key], str) for key in _ROUTE_TEXT_KEYS if key in route and key != "endpoint"
        ):
            return {}, f"the route for {role!r} must have string values for {', '.join(_ROUTE_TEXT_KEYS)}"
        if "endpoint" in route and (problem := _endpoint_problem(route["endpoint"])) is not None:
            return {}, f"the route for {role!r}: endpoint {problem}"
        for key, (low, high) in _ROUTE_NUMBER_KEYS.items():
            number = route.get(key)
            if key in route and (
                not isinstance(number, int | float) or isinstance(number, bool) or not low <= number <= high
            ):
                return {}, f"the route for {role!r} must have {key} from {low:g} to {high:g}"
        routes[role] = dict(route)
    return routes, None


def _default(options: type[Any], name: str) -> Any:
    """The default that an options dataclass gives its field `name` (an enum member as its plain value)."""
    (option,) = (option for option in fields(options) if option.name == name)
    if option.default is MISSING:
        raise ValueError(f"{options.__name__}.{name} has no plain default for the settings table")
    return option.default.value if isinstance(option.default, Enum) else option.default


def _spelled(choices: Mapping[str, Any], option: Any) -> str:
    """The setting's spelling of an option's value."""
    (spelling,) = (spelling for spelling, value in choices.items() if value == option)
    return spelling


def _values(choices: type[Enum]) -> tuple[str, ...]:
    return tuple(member.value for member in choices)


_STRUCTURED_MODES = _values(StructuredMode)
# Where a setting spells its values unlike the option it sets: the one mapping, both ways.
_SOMS_LOOPS: dict[str, tuple[str, ...]] = {"all": LOOPS, "laypersonOnly": (LAYPERSON,)}
_LAY_ABLATIONS = {
    "none": "",
    "noReader": "no_reader",
    "noEditor": "no_editor",
    "noCollaboration": "no_collaboration",
}
_MB = 1024 * 1024

SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec(
        "readability.enabled",
        "boolean",
        True,
        "Show a readability diagnostic on paragraphs that are hard to read.",
    ),
    SettingSpec(
        "readability.threshold",
        "number",
        18.0,
        "Flesch-Kincaid grade above which a paragraph gets a readability diagnostic.",
        minimum=0,
        maximum=50,
    ),
    SettingSpec(
        "readability.minWords",
        "integer",
        25,
        "Paragraphs with fewer words get no readability diagnostic (the formulas are noisy on short text).",
        minimum=0,
        maximum=10_000,
    ),
    SettingSpec(
        "readability.gradeHints",
        "boolean",
        False,
        "Show each paragraph's Flesch-Kincaid grade as an inlay hint at its end (paragraphs of at least "
        "readability.minWords words).",
    ),
    SettingSpec(
        "review.trigger",
        "string",
        "auto",
        "When focused feedback runs: on open and on save (changed paragraphs only), on save only, or only "
        "when asked (commands and the code action). auto: on open and save with a model server, on save only "
        "with the embedded model (it takes a core for a minute or so per paragraph).",
        choices=("auto", "openAndSave", "save", "manual"),
    ),
    SettingSpec(
        "review.mode",
        "string",
        "auto",
        "full: planner, controller, investigator and reviewer; fast: one reviewer call with context from the "
        "paper; single: the reviewer alone. auto: full with a model server, fast with the embedded model.",
        choices=("auto", "full", "fast", "single"),
    ),
    SettingSpec(
        "review.severity",
        "string",
        "warning",
        "Severity of focused-feedback diagnostics.",
        choices=("error", "warning", "information", "hint"),
    ),
    SettingSpec(
        "review.candidatePlans",
        "integer",
        _default(ReviewOptions, "candidates"),
        "Plans the planner writes; the best one runs.",
        minimum=1,
        maximum=8,
    ),
    SettingSpec(
        "review.planJudge",
        "boolean",
        _default(ReviewOptions, "judge"),
        "Also let a model rate the candidate plans.",
    ),
    SettingSpec(
        "review.maxFindings",
        "integer",
        _default(ReviewOptions, "max_findings"),
        "Findings per paragraph: one, the most important, as in the SWIF2T paper (models asked for several "
        "invent weaknesses); up to three.",
        minimum=1,
        maximum=3,
    ),
    SettingSpec(
        "review.minWords",
        "integer",
        _default(ReviewOptions, "min_words"),
        "Paragraphs with fewer words are not reviewed.",
        minimum=1,
        maximum=10_000,
    ),
    SettingSpec(
        "review.literatureFolders",
        "list",
        [],
        "Folders (absolute, or relative to the workspace folder) whose PDFs the investigator may read.",
    ),
    SettingSpec(
        "review.webSearchUrl",
        "string",
        "",
        "A SearxNG-style JSON search URL for literature questions; empty: no web search (the default).",
        user_only=True,
    ),
    SettingSpec(
        "review.scholarlySearch",
        "string",
        "off",
        "Search a scholarly index for literature questions: OpenAlex, Semantic Scholar or arXiv; the works' "
        "abstracts and open-access PDFs are read (never peer-review sites) and cached in the user cache "
        "directory. off: nothing is searched or downloaded (the default).",
        choices=("off", "openalex", "semanticscholar", "arxiv"),
        user_only=True,
    ),
    SettingSpec(
        "review.scholarlyBaseUrl",
        "string",
        "",
        "Base URL of the scholarly search's API (a mirror or a proxy); empty: the service's public API.",
        user_only=True,
    ),
    SettingSpec(
        "review.mailto",
        "string",
        "",
        "An e-mail address sent with scholarly searches (OpenAlex's polite pool asks for one); empty: none.",
        user_only=True,
    ),
    SettingSpec(
        "simplify.paragraphMethod",
        "string",
        SOMS,
        'How "Simplify paragraph" works: soms (Society of Medical Simplifiers: layperson, expert, simplifier, '
        "clarifier, redundancy checker) or agentsimp (AgentSimp's desk on one paragraph).",
        choices=SIMPLIFY_METHODS,
    ),
    SettingSpec(
        "simplify.domain",
        "string",
        _default(SomsOptions, "domain"),
        "Who the Society of Medical Simplifiers writes for: science (any field) or medical (the paper's setting).",
        choices=_values(Domain),
    ),
    SettingSpec(
        "simplify.loopLimit",
        "integer",
        _default(SomsOptions, "loop_limit"),
        "Times each Society of Medical Simplifiers loop (layperson, clarifier, redundancy) may run.",
        minimum=1,
        maximum=5,
    ),
    SettingSpec(
        "simplify.clarifierRounds",
        "integer",
        _default(SomsOptions, "clarifier_rounds"),
        "Rounds in which the language clarifier may revise substitutions the simplifier rejected.",
        minimum=1,
        maximum=6,
    ),
    SettingSpec(
        "simplify.communication",
        "string",
        _default(AgentSimpOptions, "communication"),
        "AgentSimp: pipeline (simplifier, then metaphor analyst, then terminology interpreter) or synchronous "
        "(side by side, fused by the content integrator).",
        choices=_values(Communication),
    ),
    SettingSpec(
        "simplify.combination",
        "string",
        _default(AgentSimpOptions, "combination"),
        "AgentSimp's article architect: iterative (overlapping chunks) or direct (the whole document at once).",
        choices=_values(Combination),
    ),
    SettingSpec(
        "simplify.chunkSize",
        "integer",
        _default(AgentSimpOptions, "chunk_size"),
        "Paragraphs per article-architect call in iterative combination.",
        minimum=1,
        maximum=10,
    ),
    SettingSpec(
        "simplify.proofread",
        "boolean",
        _default(AgentSimpOptions, "proofread"),
        "Let AgentSimp's proofreader check the result last.",
    ),
    SettingSpec(
        "simplify.architect",
        "boolean",
        _default(AgentSimpOptions, "architect"),
        "Let AgentSimp's article architect smooth the transitions (off: the paper's ablation without it).",
    ),
    SettingSpec(
        "simplify.metaphorAnalyst",
        "boolean",
        _default(AgentSimpOptions, "metaphor_analyst"),
        "Let AgentSimp's metaphor analyst explain figurative language (off: the paper's ablation without it).",
    ),
    SettingSpec(
        "simplify.terminologyInterpreter",
        "boolean",
        _default(AgentSimpOptions, "terminology_interpreter"),
        "Let AgentSimp's terminology interpreter explain technical terms (off: the paper's ablation without it).",
    ),
    SettingSpec(
        "simplify.somsLoops",
        "string",
        _spelled(_SOMS_LOOPS, _default(SomsOptions, "loops")),
        "Which Society of Medical Simplifiers loops may run: all three, or the layperson loop only (the paper's "
        "ablation).",
        choices=tuple(_SOMS_LOOPS),
    ),
    SettingSpec(
        "lay.iterations",
        "integer",
        _default(LayOptions, "iterations"),
        "Reader-editor-journalist rounds after the lay article's first draft.",
        minimum=0,
        maximum=10,
    ),
    SettingSpec(
        "lay.keep",
        "string",
        _default(LayOptions, "keep"),
        "Which version of the lay article to keep: the last one, or the most readable (lowest mean of FKGL, "
        "Coleman-Liau and Dale-Chall).",
        choices=_values(Keep),
    ),
    SettingSpec(
        "lay.paperWords",
        "integer",
        _default(LayOptions, "paper_words"),
        "How many words of the paper (abstract first, then key sections) the journalist and editor read.",
        minimum=100,
        maximum=50_000,
    ),
    SettingSpec(
        "lay.ablation",
        "string",
        _spelled(_LAY_ABLATIONS, _default(LayOptions, "ablation")),
        "JRE-L's ablations, to reproduce the paper's Table 3: none (the whole loop), noReader (the editor "
        "advises from the article alone), noEditor (the journalist revises from the reader's notes) or "
        "noCollaboration (the journalist revises its own draft).",
        choices=tuple(_LAY_ABLATIONS),
    ),
    SettingSpec(
        "rewrite.transcripts",
        "boolean",
        False,
        "Save each rewrite's whole agent conversation as JSON in .margin/transcripts/ of the workspace folder.",
    ),
    SettingSpec(
        "server.command",
        "list",
        [],
        'Editor side (VS Code): the whole command that starts the server, e.g. ["/path/to/.venv/bin/margin", '
        '"serve"]. The server ignores it.',
        user_only=True,
    ),
    SettingSpec(
        "server.pythonPath",
        "string",
        "",
        "Editor side (VS Code): a Python with margin installed, run as `python -m margin.server` when "
        "server.command is empty. The server ignores it.",
        user_only=True,
    ),
    SettingSpec(
        "maxFileSizeMB",
        "number",
        10.0,
        "Files larger than this many megabytes are not analysed; margin says so instead.",
        minimum=0.1,
        maximum=200,
    ),
    SettingSpec(
        "allowedFolders",
        "list",
        [],
        "Folders outside the workspace that margin may read files from: included files, a `% !TEX root`, "
        "literature folders. Absolute paths; links are followed before the check.",
        user_only=True,
    ),
    SettingSpec(
        "llm.endpoint",
        "endpoint",
        AUTO,
        'OpenAI-compatible base URL (vLLM, llama.cpp, Ollama, OpenAI...). "auto": a vLLM server at '
        "http://localhost:8000/v1 if one answers, else the embedded small model if installed. A list of URLs "
        "is a pool of replicas of one model: each request goes to the least-loaded healthy one.",
        user_only=True,
    ),
    SettingSpec(
        "llm.apiKeyEnv",
        "string",
        "",
        "Name of the environment variable that holds the API key (the key itself never goes in settings).",
        user_only=True,
    ),
    SettingSpec("llm.model", "string", "", "Model name; empty: the first model the endpoint lists."),
    SettingSpec(
        "llm.temperature",
        "number",
        _default(EndpointConfig, "temperature"),
        "Sampling temperature.",
        minimum=0,
        maximum=2,
    ),
    SettingSpec(
        "llm.topP",
        "number",
        _default(EndpointConfig, "top_p"),
        "Nucleus sampling top_p.",
        minimum=0,
        maximum=1,
    ),
    SettingSpec(
        "llm.maxTokens",
        "integer",
        _default(EndpointConfig, "max_tokens"),
        "Most tokens per answer.",
        minimum=16,
        maximum=65536,
    ),
    SettingSpec(
        "llm.timeoutSeconds",
        "number",
        _default(EndpointConfig, "timeout"),
        "Seconds to wait for one answer.",
        minimum=1,
        maximum=3600,
    ),
    SettingSpec(
        "llm.maxConcurrency",
        "integer",
        _default(EndpointConfig, "max_concurrency"),
        "Most requests in flight to one endpoint, shared by all documents and pipelines.",
        minimum=1,
        maximum=512,
    ),
    SettingSpec(
        "llm.structuredOutput",
        "string",
        _default(EndpointConfig, "structured_mode"),
        "How to ask for JSON: auto negotiates per endpoint (json_schema, then json_object, then plain text).",
        choices=_STRUCTURED_MODES,
    ),
    SettingSpec(
        "llm.retries",
        "integer",
        _default(LLMConfig, "retries"),
        "Retries after a rate limit, server error or timeout.",
        minimum=0,
        maximum=10,
    ),
    SettingSpec(
        "llm.roles",
        "object",
        {},
        'Per-role routing, e.g. {"reader": {"endpoint": "http://localhost:8001/v1", "model": "small"}}; '
        "a route's endpoint may also be a list of replicas' URLs; roles not named use the default endpoint and model. A route may also set the role's temperature, topP "
        "and frequencyPenalty, over its pipeline's defaults (JRE-L: topP 0.4, frequencyPenalty 1; AgentSimp: "
        "temperature 0.6, as in the papers).",
        user_only=True,
    ),
    SettingSpec(
        "cache.enabled",
        "boolean",
        _default(LLMConfig, "cache_enabled"),
        "Keep model answers in a persistent cache keyed by content.",
    ),
    SettingSpec(
        "cache.maxSizeMB",
        "number",
        _default(LLMConfig, "cache_max_bytes") / _MB,
        "Size bound of the cache; least recently used answers go first.",
        minimum=1,
        maximum=100_000,
    ),
    SettingSpec(
        "cache.path",
        "string",
        "",
        "Cache file; empty: llm-cache.sqlite3 in the user cache directory.",
        user_only=True,
    ),
    SettingSpec(
        "logLevel",
        "string",
        "info",
        "How much margin writes to its log (the editor's output panel and stderr).",
        choices=("error", "warning", "info", "debug"),
    ),
)
_BY_KEY = {spec.key: spec for spec in SETTINGS}


@dataclass(frozen=True, slots=True)
class OnlineSearches:
    web: WebSearch | None
    scholarly: ScholarlySearch | None


@dataclass(frozen=True, slots=True)
class Settings:
    values: Mapping[str, Any]
    # The typed sections, built from `values` the first time one is read (settings_sections is generated from
    # SETTINGS; it is imported then, so that `--write-sections` works even when the file is out of date).
    _sections: SettingsSections | None = field(default=None, init=False, repr=False, compare=False)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def sections(self) -> SettingsSections:
        """Every section, typed: settings.review.trigger, settings.simplify.loop_limit, settings.llm.max_tokens."""
        sections = self._sections
        if sections is None:
            from margin.server.settings_sections import SettingsSections

            sections = SettingsSections.from_values(self.values)
            object.__setattr__(self, "_sections", sections)
        return sections

    @property
    def readability(self) -> ReadabilitySettings:
        return self.sections.readability

    @property
    def review(self) -> ReviewSettings:
        return self.sections.review

    @property
    def simplify(self) -> SimplifySettings:
        return self.sections.simplify

    @property
    def lay(self) -> LaySettings:
        return self.sections.lay

    @property
    def rewrite(self) -> RewriteSettings:
        return self.sections.rewrite

    @property
    def server(self) -> ServerSettings:
        return self.sections.server

    @property
    def llm(self) -> LLMSettings:
        return self.sections.llm

    @property
    def cache(self) -> CacheSettings:
        return self.sections.cache

    @property
    def general(self) -> GeneralSettings:
        """The settings outside any section (maxFileSizeMB, allowedFolders, logLevel), as given."""
        return self.sections.general

    @property
    def max_file_size_mb(self) -> float:
        return self.general.max_file_size_mb

    @property
    def log_level(self) -> LogLevel:
        return self.general.log_level

    @property
    def readability_enabled(self) -> bool:
        return self.readability.enabled

    @property
    def readability_threshold(self) -> float:
        return self.readability.threshold

    @property
    def readability_min_words(self) -> int:
        return self.readability.min_words

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_size_mb * 1024 * 1024)

    @property
    def allowed_folders(self) -> list[Path]:
        """Folders outside the workspace the user lets margin read (absolute paths only)."""
        folders = [Path(entry).expanduser() for entry in self.general.allowed_folders]
        return [folder for folder in folders if folder.is_absolute()]

    def review_trigger(self, endpoint: str = "server") -> str:
        """When reviews run, for an endpoint of this kind ("server", "embedded" or "none": EndpointKind)."""
        trigger = self.review.trigger
        if trigger != "auto":
            return trigger
        return "save" if endpoint == "embedded" else "openAndSave"

    def review_mode(self, endpoint: str = "server") -> str:
        mode = self.review.mode
        if mode != "auto":
            return mode
        return "fast" if endpoint == "embedded" else "full"

    def review_options(self, endpoint: str = "server") -> ReviewOptions:
        review = self.review
        return ReviewOptions(
            mode=Mode(self.review_mode(endpoint)),
            candidates=review.candidate_plans,
            judge=review.plan_judge,
            min_words=review.min_words,
            max_findings=review.max_findings,
        )

    def online_searches(self) -> OnlineSearches:
        """The web and scholarly searches the user opted in to (None each when off), for every review path:
        the editor, `margin review` and `margin eval feedback`."""
        from margin.workflows.feedback.literature import WebSearch
        from margin.workflows.feedback.scholarly import scholarly_search

        review = self.review
        url = review.web_search_url
        return OnlineSearches(
            WebSearch(url) if url else None,
            scholarly_search(review.scholarly_search, review.scholarly_base_url, review.mailto),
        )

    def section(self, name: str) -> dict[str, Any]:
        """The settings under `name` (e.g. "simplify"), for a transcript's record of how a run was set up."""
        return {key: value for key, value in self.values.items() if key.startswith(f"{name}.")}

    def soms_options(self) -> SomsOptions:
        simplify = self.simplify
        return SomsOptions(
            domain=Domain(simplify.domain),
            loop_limit=simplify.loop_limit,
            clarifier_rounds=simplify.clarifier_rounds,
            loops=_SOMS_LOOPS[simplify.soms_loops],
        )

    def agentsimp_options(self) -> AgentSimpOptions:
        simplify = self.simplify
        return AgentSimpOptions(
            communication=Communication(simplify.communication),
            combination=Combination(simplify.combination),
            chunk_size=simplify.chunk_size,
            proofread=simplify.proofread,
            architect=simplify.architect,
            metaphor_analyst=simplify.metaphor_analyst,
            terminology_interpreter=simplify.terminology_interpreter,
        )

    def lay_options(self) -> LayOptions:
        lay = self.lay
        return LayOptions(
            iterations=lay.iterations,
            keep=Keep(lay.keep),
            paper_words=lay.paper_words,
            ablation=_LAY_ABLATIONS[lay.ablation],
        )

    def llm_config(self) -> LLMConfig:
        """The LLM layer's configuration from these settings."""
        llm, cache = self.llm, self.cache
        base_url, replicas = split_urls(llm.endpoint or AUTO)
        default = EndpointConfig(
            base_url=base_url or AUTO,
            replicas=replicas,
            api_key_env=llm.api_key_env or None,
            model=llm.model or None,
            temperature=llm.temperature,
            top_p=llm.top_p,
            max_tokens=llm.max_tokens,
            timeout=llm.timeout_seconds,
            max_concurrency=llm.max_concurrency,
            structured_mode=StructuredMode(llm.structured_output),
        )
        roles = {
            role: RoleRoute(
                base_url=split_urls(route.get("endpoint") or "")[0] or None,
                replicas=split_urls(route.get("endpoint") or "")[1],
                model=route.get("model") or None,
                api_key_env=route.get("apiKeyEnv") or None,
                temperature=route.get("temperature"),
                top_p=route.get("topP"),
                frequency_penalty=route.get("frequencyPenalty"),
            )
            for role, route in llm.roles.items()
        }
        return LLMConfig(
            default=default,
            roles=roles,
            cache_enabled=cache.enabled,
            cache_path=Path(cache.path).expanduser() if cache.path else None,
            cache_max_bytes=int(cache.max_size_mb * 1024 * 1024),
            retries=llm.retries,
        )


DEFAULTS = Settings({spec.key: spec.default for spec in SETTINGS})


def _flatten(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and dotted not in _BY_KEY:
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def parse_settings(raw: Any) -> tuple[Settings, list[str]]:
    """Settings from what a client sent, and a message for each value that was unusable or unknown."""
    if raw is None:
        return DEFAULTS, []
    if not isinstance(raw, Mapping):
        return DEFAULTS, [
            f"Settings for {SECTION} must be an object; got {type(raw).__name__}. Using defaults."
        ]
    if SECTION in raw and isinstance(raw[SECTION], Mapping):
        raw = raw[SECTION]
    values = dict(DEFAULTS.values)
    problems: list[str] = []
    for key, value in _flatten(raw).items():
        key = key.removeprefix(SECTION + ".")
        spec = _BY_KEY.get(key)
        if spec is None:
            problems.append(f"Unknown setting {SECTION}.{key} is ignored.")
            continue
        if value is None:
            continue
        values[key], problem = spec.validate(value)
        if problem:
            problems.append(problem)
    return Settings(values), problems


USER_ONLY_KEYS = tuple(spec.key for spec in SETTINGS if spec.user_only)


def keep_user_values(settings: Settings, user: Settings) -> tuple[Settings, list[str]]:
    """`settings` from a source a workspace can write, with every user-only value taken from `user`.

    Returns the settings and the user-only keys whose value was different (ignored), for one message.
    """
    ignored = [key for key in USER_ONLY_KEYS if settings.values[key] != user.values[key]]
    if not ignored:
        return settings, []
    values = dict(settings.values)
    values.update({key: user.values[key] for key in ignored})
    return Settings(values), ignored


def ignored_message(keys: list[str], source: str) -> str:
    names = ", ".join(f"{SECTION}.{key}" for key in keys)
    return (
        f"{names} from {source} ignored: a project can write those, and these settings decide where your "
        "manuscript and API key go and which files outside the workspace are read. margin takes them only "
        "from your user-level configuration (the server's initializationOptions); see the README, "
        '"Settings a workspace cannot change".'
    )


_VSCODE_TYPES = {
    "boolean": "boolean",
    "number": "number",
    "integer": "integer",
    "string": "string",
    "list": "array",
    "object": "object",
    "endpoint": ["string", "array"],
}


def vscode_configuration() -> dict[str, dict[str, Any]]:
    """contributes.configuration.properties of the VS Code extension: the same table, as VS Code's schema."""
    properties: dict[str, dict[str, Any]] = {}
    for spec in SETTINGS:
        schema: dict[str, Any] = {
            "type": _VSCODE_TYPES[spec.kind],
            "default": spec.default,
            "markdownDescription": spec.full_description(),
            # An application-scoped setting is taken from the user's settings only: a cloned repository can
            # neither choose the command that runs nor where the manuscript and the API key go. Not "machine":
            # in a remote window (code-server, Remote-SSH, WSL) VS Code drops a machine-scoped value of the
            # user's settings as soon as any setting changes, and the endpoint fell back to "auto".
            "scope": "application" if spec.user_only else "resource",
        }
        if spec.user_only:
            schema["ignoreSync"] = True  # endpoints, keys' names and paths stay on this machine, as before

        if spec.choices:
            schema["enum"] = list(spec.choices)
        if spec.minimum is not None:
            schema["minimum"] = spec.minimum
        if spec.maximum is not None:
            schema["maximum"] = spec.maximum
        if spec.kind in ("list", "endpoint"):
            schema["items"] = {"type": "string"}
        if spec.kind == "object":
            schema["additionalProperties"] = {
                "type": "object",
                "properties": {
                    **{key: {"type": "string"} for key in _ROUTE_TEXT_KEYS},
                    "endpoint": {"type": ["string", "array"], "items": {"type": "string"}},
                    **{
                        key: {"type": "number", "minimum": low, "maximum": high}
                        for key, (low, high) in _ROUTE_NUMBER_KEYS.items()
                    },
                },
                "additionalProperties": False,
            }
        properties[f"{SECTION}.{spec.key}"] = schema
    return properties


# In a workspace VS Code does not trust, these settings take the user's value only (the user-only ones are
# application-scoped, so that holds in trusted workspaces too).
UNTRUSTED_WORKSPACE_RESTRICTED = (
    *USER_ONLY_KEYS,
    "review.literatureFolders",
    "rewrite.transcripts",
    "maxFileSizeMB",
)


def vscode_capabilities() -> dict[str, Any]:
    """The extension's `capabilities`: it works in untrusted workspaces, with restricted settings."""
    return {
        "untrustedWorkspaces": {
            "supported": "limited",
            "description": "In an untrusted workspace margin ignores the workspace's values of settings that decide "
            "where the manuscript goes, which files are read or written, and which command starts the server.",
            "restrictedConfigurations": [f"{SECTION}.{key}" for key in UNTRUSTED_WORKSPACE_RESTRICTED],
        }
    }


def write_vscode_schema(package_json: Path) -> None:
    """Put the schema into the extension's package.json (the one place it is edited by hand is this table)."""
    package = json.loads(package_json.read_text(encoding="utf-8"))
    package["contributes"]["configuration"]["properties"] = vscode_configuration()
    package["capabilities"] = vscode_capabilities()
    package_json.write_text(json.dumps(package, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def markdown_table() -> str:
    """The settings as the README documents them (a test keeps the README in step with this table)."""
    rows = ["| setting | type | default | what it does |", "|---|---|---|---|"]
    for spec in SETTINGS:
        kind = " \\| ".join(f"`{choice}`" for choice in spec.choices) if spec.choices else spec.kind
        default = json.dumps(spec.default)
        rows.append(f"| `{SECTION}.{spec.key}` | {kind} | `{default}` | {spec.full_description()} |")
    return "\n".join(rows)


# -- the typed sections, generated from the table -----------------------------------------------------------------

# The section of the settings whose key has no dot (maxFileSizeMB, allowedFolders, logLevel).
GENERAL = "general"
SECTIONS_MODULE = Path(__file__).with_name("settings_sections.py")
_PYTHON_TYPES = {
    "boolean": "bool",
    "number": "float",
    "integer": "int",
    "string": "str",
    "list": "list[str]",
    "object": "dict[str, dict[str, Any]]",
    "endpoint": "str | list[str]",
}
_CONVERSIONS = {"boolean": "bool", "number": "float", "integer": "int"}  # as the untyped accessors read them
_PREFIXES = {"llm": "LLM"}


def snake_case(name: str) -> str:
    """loopLimit -> loop_limit, maxFileSizeMB -> max_file_size_mb."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def attribute_of(key: str) -> tuple[str, str]:
    """Where a setting is read typed: settings.<section>.<attribute> (section GENERAL for a key with no dot)."""
    section, _, name = key.rpartition(".")
    return section or GENERAL, snake_case(name)


def _prefix(section: str) -> str:
    return _PREFIXES.get(section, section[:1].upper() + section[1:])


def _choices_alias(spec: SettingSpec) -> str:
    """The name of a setting's Literal type: ReviewTrigger for review.trigger, LogLevel for logLevel."""
    section, _, name = spec.key.rpartition(".")
    return (_prefix(section) if section else "") + name[:1].upper() + name[1:]


def _sections() -> dict[str, list[SettingSpec]]:
    """The table's settings by section, in the table's order, GENERAL last."""
    sections: dict[str, list[SettingSpec]] = {}
    for spec in SETTINGS:
        sections.setdefault(attribute_of(spec.key)[0], []).append(spec)
    if GENERAL in sections:
        sections[GENERAL] = sections.pop(GENERAL)
    for section, specs in sections.items():
        names = [section, *(attribute_of(spec.key)[1] for spec in specs)]
        if any(not name.isidentifier() or keyword.iskeyword(name) for name in names):
            raise ValueError(f"a setting of {section} has no usable Python name: {names}")
        if len(set(names[1:])) != len(names) - 1:
            raise ValueError(f"two settings of {section} have the same Python name: {names}")
    return sections


def sections_module() -> str:
    """The source of margin.server.settings_sections: a frozen dataclass per section of SETTINGS, typed."""
    sections = _sections()
    lines = [
        "# Generated by python -m margin.server.settings --write-sections; do not edit.",
        '"""margin\'s settings as typed sections: one frozen dataclass per section of the table in',
        "margin.server.settings, with its fields in snake_case.",
        "",
        "Settings builds them once from its values: settings.review.trigger, settings.simplify.loop_limit, and",
        "settings.general.log_level for the settings outside any section. tests/test_settings_sections.py checks that",
        "this file is what the table generates now.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Mapping",
        "from dataclasses import dataclass",
        "from typing import Any, Literal",
        "",
        "# The settings that take one of a few strings.",
    ]
    for spec in SETTINGS:
        if spec.choices:
            choices = ", ".join(json.dumps(choice) for choice in spec.choices)
            lines.append(f"{_choices_alias(spec)} = Literal[{choices}]")
    for section, specs in sections.items():
        name = f"{_prefix(section)}Settings"
        where = (
            f"The settings outside any section: {', '.join(f'{SECTION}.{spec.key}' for spec in specs)}."
            if section == GENERAL
            else f"{SECTION}.{section}.*"
        )
        lines += ["", "", "@dataclass(frozen=True, slots=True)", f"class {name}:", f'    """{where}"""', ""]
        for spec in specs:
            kind = _choices_alias(spec) if spec.choices else _PYTHON_TYPES[spec.kind]
            lines.append(f"    {attribute_of(spec.key)[1]}: {kind}  # {SECTION}.{spec.key}")
        lines += [
            "",
            "    @classmethod",
            f"    def from_values(cls, values: Mapping[str, Any]) -> {name}:",
            "        return cls(",
        ]
        for spec in specs:
            read = f"values[{json.dumps(spec.key)}]"
            if spec.kind in _CONVERSIONS:
                read = f"{_CONVERSIONS[spec.kind]}({read})"
            lines.append(f"            {attribute_of(spec.key)[1]}={read},")
        lines.append("        )")
    lines += [
        "",
        "",
        "@dataclass(frozen=True, slots=True)",
        "class SettingsSections:",
        '    """Every section, as a Settings builds them from its values."""',
        "",
        *(f"    {section}: {_prefix(section)}Settings" for section in sections),
        "",
        "    @classmethod",
        "    def from_values(cls, values: Mapping[str, Any]) -> SettingsSections:",
        "        return cls(",
        *(f"            {section}={_prefix(section)}Settings.from_values(values)," for section in sections),
        "        )",
        "",
        "",
        "# Each setting's typed place: settings.<section>.<attribute>.",
        "ATTRIBUTES: dict[str, tuple[str, str]] = {",
        *(
            f'    "{spec.key}": ("{section}", "{name}"),'
            for spec in SETTINGS
            for section, name in [attribute_of(spec.key)]
        ),
        "}",
    ]
    return "\n".join(lines) + "\n"


def write_sections(module: Path = SECTIONS_MODULE) -> None:
    """Write the typed sections' module (after a change to the table; a test keeps the two in step)."""
    module.write_text(sections_module(), encoding="utf-8")


# python -m margin.server.settings: the README's table; --write-vscode vscode-extension/package.json: the
# extension's schema; --write-sections [path]: the typed sections (server/settings_sections.py).
if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--write-vscode"] and len(sys.argv) == 3:
        write_vscode_schema(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["--write-sections"] and len(sys.argv) <= 3:
        write_sections(Path(sys.argv[2]) if len(sys.argv) == 3 else SECTIONS_MODULE)
    else:
        print(markdown_table())
