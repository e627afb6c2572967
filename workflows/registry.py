"""Every pipeline margin runs, described once: its id, its title, the agent roles it sends requests as, the
prompt templates (prompts/*.txt) those roles read, the command that runs it and the id `margin eval` knows it by.

This module is data only (the standard library's dataclasses, nothing of margin's): the settings, the command
line and the LLM layer may all read it without importing a pipeline, a parser or a model client.
tests/test_registry.py checks it against the pipelines' code and the prompt files.
"""

from __future__ import annotations

from dataclasses import dataclass

# Pipeline ids. A rewriting pipeline's id is also the `method` its transcripts are saved under.
SWIF2T = "swif2t"
SOMS = "soms"
AGENTSIMP = "agentsimp"
JREL = "jrel"

# Ids of the evaluation methods (`margin eval METHOD`): the simplifiers' are their pipeline ids.
FEEDBACK = "feedback"
LAY = "lay"

# Commands of the command line that run a pipeline (`margin review`, `margin simplify`, `margin lay`).
REVIEW_COMMAND = "review"
SIMPLIFY_COMMAND = "simplify"
LAY_COMMAND = "lay"

# What every role's system prompt ends with (margin.workflows.prompts.role_prompt): fenced text is data.
COMMON_PROMPTS: tuple[str, ...] = ("untrusted",)
# Roles of margin's own requests, outside any pipeline: `margin doctor`'s connectivity check.
DOCTOR = "doctor"
OWN_ROLES: tuple[str, ...] = (DOCTOR,)


@dataclass(frozen=True, slots=True)
class Pipeline:
    id: str
    title: str
    roles: tuple[str, ...]  # the roles its requests are sent as (routable in margin.llm.roles)
    prompts: tuple[str, ...]  # the templates its roles read, beside COMMON_PROMPTS
    command: str  # the CLI command that runs it
    method: str | None  # its `margin simplify --method` and simplify.paragraphMethod; None: not a choice
    eval_id: str  # its method in `margin eval`
    modules: tuple[str, ...]  # where its requests are written (tests/test_registry.py reads them)


PIPELINES: tuple[Pipeline, ...] = (
    Pipeline(
        id=SWIF2T,
        title="SWIF2T focused feedback",
        roles=("planner", "controller", "investigator", "reviewer", "judge"),
        prompts=("planner", "controller", "investigator", "reviewer", "reviewer_examples", "judge"),
        command=REVIEW_COMMAND,
        method=None,
        eval_id=FEEDBACK,
        modules=("margin.workflows.feedback.agents", "margin.workflows.feedback.pipeline"),
    ),
    Pipeline(
        id=JREL,
        title="JRE-L lay articles",
        roles=("journalist", "reader", "editor"),
        prompts=("journalist", "reader", "editor"),
        command=LAY_COMMAND,
        method=None,
        eval_id=LAY,
        modules=("margin.workflows.rewrite.jrel",),
    ),
    Pipeline(
        id=SOMS,
        title="Society of Medical Simplifiers",
        roles=("layperson", "expert", "simplifier", "clarifier", "redundancy_checker", "selector"),
        prompts=(
            *("layperson", "expert", "simplifier", "clarifier", "redundancy_checker", "selector"),
            "repair",  # the simplifier's one repair of a rewrite that lost a protected element
        ),
        command=SIMPLIFY_COMMAND,
        method=SOMS,
        eval_id=SOMS,
        modules=("margin.workflows.rewrite.soms", "margin.workflows.rewrite.safety"),
    ),
    Pipeline(
        id=AGENTSIMP,
        title="AgentSimp",
        roles=(
            *("director", "analyst", "simplifier", "supervisor", "metaphor_analyst"),
            *("terminology_interpreter", "integrator", "architect", "proofreader"),
        ),
        prompts=(
            *("director", "analyst", "content_simplifier", "supervisor", "metaphor_analyst"),
            *("terminology_interpreter", "integrator", "architect", "proofreader"),
            "repair",  # the proofreader's one repair of a rewrite that lost a protected element
        ),
        command=SIMPLIFY_COMMAND,
        method=AGENTSIMP,
        eval_id=AGENTSIMP,
        modules=("margin.workflows.rewrite.agentsimp", "margin.workflows.rewrite.safety"),
    ),
)

BY_ID: dict[str, Pipeline] = {pipeline.id: pipeline for pipeline in PIPELINES}
BY_EVAL_ID: dict[str, Pipeline] = {pipeline.eval_id: pipeline for pipeline in PIPELINES}

# Every agent role, each once: the pipelines' in the order above, then margin's own. A role two pipelines share
# (the simplifier) is one route in margin.llm.roles.
ROLES: tuple[str, ...] = tuple(
    dict.fromkeys([*(role for pipeline in PIPELINES for role in pipeline.roles), *OWN_ROLES])
)
# The methods of `margin simplify --method` (and of the setting simplify.paragraphMethod).
SIMPLIFY_METHODS: tuple[str, ...] = tuple(pipeline.method for pipeline in PIPELINES if pipeline.method)
