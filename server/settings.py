"""margin's settings: one declarative table that the server, the CLI, the README and editor clients share.

Values arrive under the section `margin`, nested ({"readability": {"threshold": 18}}) or dotted
({"readability.threshold": 18}), from initializationOptions or workspace/configuration. A bad value never
stops the server: it is reported by name and the default is used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only the LLM layer's plain configuration types: the pipelines' options are imported where they are built, so
# that reading settings (every command, the server's start) does not import the pipelines and the OpenAI client.
from margin.workflows.llm.config import AUTO, EndpointConfig, LLMConfig, RoleRoute
from margin.workflows.llm.types import ROLES, StructuredMode

if TYPE_CHECKING:
    from margin.workflows.feedback.literature import WebSearch
    from margin.workflows.feedback.pipeline import ReviewOptions
    from margin.workflows.feedback.scholarly import ScholarlySearch
    from margin.workflows.rewrite.agentsimp import AgentSimpOptions
    from margin.workflows.rewrite.jrel import LayOptions
    from margin.workflows.rewrite.soms import SomsOptions

SECTION = "margin"


@dataclass(frozen=True, slots=True)
class SettingSpec:
    key: str
    kind: (
        str  # "boolean" | "number" | "integer" | "string" | "list" (of strings) | "object" (per-role routes)
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
        return "true or false" if self.kind == "boolean" else "a string"


_ROUTE_TEXT_KEYS = ("endpoint", "model", "apiKeyEnv")
# Sampling a role may have of its own (over its pipeline's defaults from the paper), with the range each takes.
_ROUTE_NUMBER_KEYS = {"temperature": (0.0, 2.0), "topP": (0.0, 1.0), "frequencyPenalty": (-2.0, 2.0)}
_ROUTE_KEYS = (*_ROUTE_TEXT_KEYS, *_ROUTE_NUMBER_KEYS)


def _role_routes(value: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], str | None]:
    routes: dict[str, dict[str, Any]] = {}
    for role, route in value.items():
        if role not in ROLES:
            return {}, f"unknown agent role {role!r} (known: {', '.join(ROLES)})"
        if not isinstance(route, Mapping) or any(key not in _ROUTE_KEYS for key in route):
            return {}, f"the route for {role!r} must be an object with some of {', '.join(_ROUTE_KEYS)}"
        if any(not isinstance(route[key], str) for key in _ROUTE_TEXT_KEYS if key in route):
            return {}, f"the route for {role!r} must have string values for {', '.join(_ROUTE_TEXT_KEYS)}"
        for key, (low, high) in _ROUTE_NUMBER_KEYS.items():
            number = route.get(key)
            if key in route and (
                not isinstance(number, int | float) or isinstance(number, bool) or not low <= number <= high
            ):
                return {}, f"the route for {role!r} must have {key} from {low:g} to {high:g}"
        routes[role] = dict(route)
    return routes, None


_STRUCTURED_MODES = tuple(mode.value for mode in StructuredMode)

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
        3,
        "Plans the planner writes; the best one runs.",
        minimum=1,
        maximum=8,
    ),
    SettingSpec("review.planJudge", "boolean", False, "Also let a model rate the candidate plans."),
    SettingSpec(
        "review.maxFindings",
        "integer",
        1,
        "Findings per paragraph: one, the most important, as in the SWIF2T paper (models asked for several "
        "invent weaknesses); up to three.",
        minimum=1,
        maximum=3,
    ),
    SettingSpec(
        "review.minWords",
        "integer",
        25,
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
        "soms",
        'How "Simplify paragraph" works: soms (Society of Medical Simplifiers: layperson, expert, simplifier, '
        "clarifier, redundancy checker) or agentsimp (AgentSimp's desk on one paragraph).",
        choices=("soms", "agentsimp"),
    ),
    SettingSpec(
        "simplify.domain",
        "string",
        "science",
        "Who the Society of Medical Simplifiers writes for: science (any field) or medical (the paper's setting).",
        choices=("science", "medical"),
    ),
    SettingSpec(
        "simplify.loopLimit",
        "integer",
        2,
        "Times each Society of Medical Simplifiers loop (layperson, clarifier, redundancy) may run.",
        minimum=1,
        maximum=5,
    ),
    SettingSpec(
        "simplify.clarifierRounds",
        "integer",
        3,
        "Rounds in which the language clarifier may revise substitutions the simplifier rejected.",
        minimum=1,
        maximum=6,
    ),
    SettingSpec(
        "simplify.communication",
        "string",
        "pipeline",
        "AgentSimp: pipeline (simplifier, then metaphor analyst, then terminology interpreter) or synchronous "
        "(side by side, fused by the content integrator).",
        choices=("pipeline", "synchronous"),
    ),
    SettingSpec(
        "simplify.combination",
        "string",
        "iterative",
        "AgentSimp's article architect: iterative (overlapping chunks) or direct (the whole document at once).",
        choices=("iterative", "direct"),
    ),
    SettingSpec(
        "simplify.chunkSize",
        "integer",
        2,
        "Paragraphs per article-architect call in iterative combination.",
        minimum=1,
        maximum=10,
    ),
    SettingSpec("simplify.proofread", "boolean", True, "Let AgentSimp's proofreader check the result last."),
    SettingSpec(
        "simplify.architect",
        "boolean",
        True,
        "Let AgentSimp's article architect smooth the transitions (off: the paper's ablation without it).",
    ),
    SettingSpec(
        "simplify.metaphorAnalyst",
        "boolean",
        True,
        "Let AgentSimp's metaphor analyst explain figurative language (off: the paper's ablation without it).",
    ),
    SettingSpec(
        "simplify.terminologyInterpreter",
        "boolean",
        True,
        "Let AgentSimp's terminology interpreter explain technical terms (off: the paper's ablation without it).",
    ),
    SettingSpec(
        "simplify.somsLoops",
        "string",
        "all",
        "Which Society of Medical Simplifiers loops may run: all three, or the layperson loop only (the paper's "
        "ablation).",
        choices=("all", "laypersonOnly"),
    ),
    SettingSpec(
        "lay.iterations",
        "integer",
        3,
        "Reader-editor-journalist rounds after the lay article's first draft.",
        minimum=0,
        maximum=10,
    ),
    SettingSpec(
        "lay.keep",
        "string",
        "last",
        "Which version of the lay article to keep: the last one, or the most readable (lowest mean of FKGL, "
        "Coleman-Liau and Dale-Chall).",
        choices=("last", "mostReadable"),
    ),
    SettingSpec(
        "lay.paperWords",
        "integer",
        1500,
        "How many words of the paper (abstract first, then key sections) the journalist and editor read.",
        minimum=100,
        maximum=50_000,
    ),
    SettingSpec(
        "lay.ablation",
        "string",
        "none",
        "JRE-L's ablations, to reproduce the paper's Table 3: none (the whole loop), noReader (the editor "
        "advises from the article alone), noEditor (the journalist revises from the reader's notes) or "
        "noCollaboration (the journalist revises its own draft).",
        choices=("none", "noReader", "noEditor", "noCollaboration"),
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
        "string",
        AUTO,
        'OpenAI-compatible base URL (vLLM, llama.cpp, Ollama, OpenAI...). "auto": a vLLM server at '
        "http://localhost:8000/v1 if one answers, else the embedded small model if installed.",
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
    SettingSpec("llm.temperature", "number", 0.2, "Sampling temperature.", minimum=0, maximum=2),
    SettingSpec("llm.topP", "number", 1.0, "Nucleus sampling top_p.", minimum=0, maximum=1),
    SettingSpec("llm.maxTokens", "integer", 1024, "Most tokens per answer.", minimum=16, maximum=65536),
    SettingSpec(
        "llm.timeoutSeconds", "number", 120.0, "Seconds to wait for one answer.", minimum=1, maximum=3600
    ),
    SettingSpec(
        "llm.maxConcurrency",
        "integer",
        8,
        "Most requests in flight to one endpoint, shared by all documents and pipelines.",
        minimum=1,
        maximum=512,
    ),
    SettingSpec(
        "llm.structuredOutput",
        "string",
        "auto",
        "How to ask for JSON: auto negotiates per endpoint (json_schema, then json_object, then plain text).",
        choices=_STRUCTURED_MODES,
    ),
    SettingSpec(
        "llm.retries",
        "integer",
        3,
        "Retries after a rate limit, server error or timeout.",
        minimum=0,
        maximum=10,
    ),
    SettingSpec(
        "llm.roles",
        "object",
        {},
        'Per-role routing, e.g. {"reader": {"endpoint": "http://localhost:8001/v1", "model": "small"}}; '
        "roles not named use the default endpoint and model. A route may also set the role's temperature, topP "
        "and frequencyPenalty, over its pipeline's defaults (JRE-L: topP 0.4, frequencyPenalty 1; AgentSimp: "
        "temperature 0.6, as in the papers).",
        user_only=True,
    ),
    SettingSpec(
        "cache.enabled", "boolean", True, "Keep model answers in a persistent cache keyed by content."
    ),
    SettingSpec(
        "cache.maxSizeMB",
        "number",
        256.0,
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

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def readability_enabled(self) -> bool:
        return bool(self.values["readability.enabled"])

    @property
    def readability_threshold(self) -> float:
        return float(self.values["readability.threshold"])

    @property
    def readability_min_words(self) -> int:
        return int(self.values["readability.minWords"])

    @property
    def max_file_bytes(self) -> int:
        return int(float(self.values["maxFileSizeMB"]) * 1024 * 1024)

    @property
    def allowed_folders(self) -> list[Path]:
        """Folders outside the workspace the user lets margin read (absolute paths only)."""
        folders = [Path(entry).expanduser() for entry in self.values["allowedFolders"]]
        return [folder for folder in folders if folder.is_absolute()]

    @property
    def log_level(self) -> str:
        return str(self.values["logLevel"])

    def review_trigger(self, endpoint: str = "server") -> str:
        """When reviews run, for an endpoint of this kind ("server", "embedded" or "none": EndpointKind)."""
        trigger = str(self.values["review.trigger"])
        if trigger != "auto":
            return trigger
        return "save" if endpoint == "embedded" else "openAndSave"

    def review_mode(self, endpoint: str = "server") -> str:
        mode = str(self.values["review.mode"])
        if mode != "auto":
            return mode
        return "fast" if endpoint == "embedded" else "full"

    def review_options(self, endpoint: str = "server") -> ReviewOptions:
        from margin.workflows.feedback.pipeline import ReviewOptions
        from margin.workflows.feedback.types import Mode

        values = self.values
        return ReviewOptions(
            mode=Mode(self.review_mode(endpoint)),
            candidates=int(values["review.candidatePlans"]),
            judge=bool(values["review.planJudge"]),
            min_words=int(values["review.minWords"]),
            max_findings=int(values["review.maxFindings"]),
        )

    def online_searches(self) -> OnlineSearches:
        """The web and scholarly searches the user opted in to (None each when off), for every review path:
        the editor, `margin review` and `margin eval feedback`."""
        from margin.workflows.feedback.literature import WebSearch
        from margin.workflows.feedback.scholarly import scholarly_search

        values = self.values
        url = values["review.webSearchUrl"]
        return OnlineSearches(
            WebSearch(url) if url else None,
            scholarly_search(
                values["review.scholarlySearch"], values["review.scholarlyBaseUrl"], values["review.mailto"]
            ),
        )

    def section(self, name: str) -> dict[str, Any]:
        """The settings under `name` (e.g. "simplify"), for a transcript's record of how a run was set up."""
        return {key: value for key, value in self.values.items() if key.startswith(f"{name}.")}

    def soms_options(self) -> SomsOptions:
        from margin.workflows.rewrite.soms import LAYPERSON, LOOPS, SomsOptions

        values = self.values
        return SomsOptions(
            domain=values["simplify.domain"],
            loop_limit=int(values["simplify.loopLimit"]),
            clarifier_rounds=int(values["simplify.clarifierRounds"]),
            loops=(LAYPERSON,) if values["simplify.somsLoops"] == "laypersonOnly" else LOOPS,
        )

    def agentsimp_options(self) -> AgentSimpOptions:
        from margin.workflows.rewrite.agentsimp import AgentSimpOptions

        values = self.values
        return AgentSimpOptions(
            communication=values["simplify.communication"],
            combination=values["simplify.combination"],
            chunk_size=int(values["simplify.chunkSize"]),
            proofread=bool(values["simplify.proofread"]),
            architect=bool(values["simplify.architect"]),
            metaphor_analyst=bool(values["simplify.metaphorAnalyst"]),
            terminology_interpreter=bool(values["simplify.terminologyInterpreter"]),
        )

    def lay_options(self) -> LayOptions:
        from margin.workflows.rewrite.jrel import LayOptions

        values = self.values
        return LayOptions(
            iterations=int(values["lay.iterations"]),
            keep=values["lay.keep"],
            paper_words=int(values["lay.paperWords"]),
            ablation=_LAY_ABLATIONS[values["lay.ablation"]],
        )

    def llm_config(self) -> LLMConfig:
        """The LLM layer's configuration from these settings."""
        values = self.values
        default = EndpointConfig(
            base_url=values["llm.endpoint"] or AUTO,
            api_key_env=values["llm.apiKeyEnv"] or None,
            model=values["llm.model"] or None,
            temperature=float(values["llm.temperature"]),
            top_p=float(values["llm.topP"]),
            max_tokens=int(values["llm.maxTokens"]),
            timeout=float(values["llm.timeoutSeconds"]),
            max_concurrency=int(values["llm.maxConcurrency"]),
            structured_mode=StructuredMode(values["llm.structuredOutput"]),
        )
        roles = {
            role: RoleRoute(
                base_url=route.get("endpoint") or None,
                model=route.get("model") or None,
                api_key_env=route.get("apiKeyEnv") or None,
                temperature=route.get("temperature"),
                top_p=route.get("topP"),
                frequency_penalty=route.get("frequencyPenalty"),
            )
            for role, route in values["llm.roles"].items()
        }
        return LLMConfig(
            default=default,
            roles=roles,
            cache_enabled=bool(values["cache.enabled"]),
            cache_path=Path(values["cache.path"]).expanduser() if values["cache.path"] else None,
            cache_max_bytes=int(float(values["cache.maxSizeMB"]) * 1024 * 1024),
            retries=int(values["llm.retries"]),
        )


DEFAULTS = Settings({spec.key: spec.default for spec in SETTINGS})
_LAY_ABLATIONS = {
    "none": "",
    "noReader": "no_reader",
    "noEditor": "no_editor",
    "noCollaboration": "no_collaboration",
}


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
}


def vscode_configuration() -> dict[str, dict[str, Any]]:
    """contributes.configuration.properties of the VS Code extension: the same table, as VS Code's schema."""
    properties: dict[str, dict[str, Any]] = {}
    for spec in SETTINGS:
        schema: dict[str, Any] = {
            "type": _VSCODE_TYPES[spec.kind],
            "default": spec.default,
            "markdownDescription": spec.full_description(),
            # VS Code ignores a workspace's value of a machine-scoped setting: a cloned repository can neither
            # choose the command that runs nor where the manuscript and the API key go.
            "scope": "machine" if spec.user_only else "resource",
        }
        if spec.choices:
            schema["enum"] = list(spec.choices)
        if spec.minimum is not None:
            schema["minimum"] = spec.minimum
        if spec.maximum is not None:
            schema["maximum"] = spec.maximum
        if spec.kind == "list":
            schema["items"] = {"type": "string"}
        if spec.kind == "object":
            schema["additionalProperties"] = {
                "type": "object",
                "properties": {
                    **{key: {"type": "string"} for key in _ROUTE_TEXT_KEYS},
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
# machine-scoped, so that holds in trusted workspaces too).
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


if __name__ == "__main__":  # python -m margin.server.settings --write-vscode vscode-extension/package.json
    import sys

    if sys.argv[1:2] == ["--write-vscode"] and len(sys.argv) == 3:
        write_vscode_schema(Path(sys.argv[2]))
    else:
        print(markdown_table())
