"""The pipeline registry (margin.workflows.registry) against the code it describes: the roles each pipeline's
requests are sent as and the prompt templates they read, collected from the pipelines' source; the prompt files;
the ids; and that the registry stays cheap to import.

Roles and templates are read from the source rather than from a run, so that a branch no scripted run takes (the
plan judge, the article architect, a repair) is covered too: a string passed where a function takes `role` is a
role; one passed to a prompt reader (prompt, render, role_prompt, a pipeline's `_system`), or as `prompt_name`, is
a template; and a role a turn is asked as without a `prompt_name` reads the template of its own name.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from margin.workflows import registry
from margin.workflows.evaluation.datasets import METHODS
from margin.workflows.registry import COMMON_PROMPTS, PIPELINES, ROLES, Pipeline

from conftest import REPO

PROMPTS = REPO / "prompts"
# What reads a template by its name (margin.workflows.prompts, Team.system, SWIF2T's agents' _system).
TEMPLATE_READERS = frozenset({"prompt", "render", "role_prompt", "system", "_system"})
# Where functions that take a role are defined, beside the pipelines' own modules.
ROLE_TAKERS = (
    "margin.workflows.rewrite.team",
    "margin.workflows.rewrite.safety",
    "margin.workflows.llm.client",
)


def source_file(module: str) -> Path:
    """The file of a margin module, found without importing it (pyproject's package-dir: margin.X is X/)."""
    parts = module.split(".")
    assert parts[0] == "margin", module
    path = REPO.joinpath(*parts[1:])
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def tree(module: str) -> ast.Module:
    return ast.parse(source_file(module).read_text(encoding="utf-8"))


def _name(call: ast.Call) -> str:
    function = call.func
    return (
        function.id
        if isinstance(function, ast.Name)
        else function.attr
        if isinstance(function, ast.Attribute)
        else ""
    )


def _constant(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((keyword.value for keyword in call.keywords if keyword.arg == name), None)


def _functions(module: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(module) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def role_takers(modules: tuple[str, ...]) -> tuple[dict[str, int | None], set[str]]:
    """Functions with a `role` parameter: its position among the positional arguments a call passes (None when
    keyword-only); and those that ask a turn as that role with the role's own template (no prompt_name)."""
    positions: dict[str, int | None] = {}
    own_template: set[str] = set()
    for module in modules:
        for function in _functions(tree(module)):
            arguments = [argument.arg for argument in function.args.posonlyargs + function.args.args]
            arguments = arguments[1:] if arguments[:1] in (["self"], ["cls"]) else arguments
            keyword_only = [argument.arg for argument in function.args.kwonlyargs]
            if "role" not in arguments and "role" not in keyword_only:
                continue
            positions[function.name] = arguments.index("role") if "role" in arguments else None
            for call in (node for node in ast.walk(function) if isinstance(node, ast.Call)):
                forwarded = call.args[0] if call.args else None
                if (
                    _name(call) == "ask"
                    and isinstance(forwarded, ast.Name)
                    and forwarded.id == "role"
                    and _keyword(call, "prompt_name") is None
                ):
                    own_template.add(function.name)
    return positions, own_template


def named_in(modules: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """The roles and the templates that the code of `modules` names."""
    positions, own_template = role_takers((*modules, *ROLE_TAKERS))
    roles: set[str] = set()
    templates: set[str] = set()
    for module in modules:
        for call in (node for node in ast.walk(tree(module)) if isinstance(node, ast.Call)):
            name = _name(call)
            role = _constant(_keyword(call, "role"))
            position = positions.get(name)
            if role is None and position is not None and len(call.args) > position:
                role = _constant(call.args[position])
            if role is not None:
                roles.add(role)
                asks_own = name == "ask" and _keyword(call, "prompt_name") is None
                if asks_own or name in own_template:
                    templates.add(role)
            if name in TEMPLATE_READERS and call.args and _constant(call.args[0]) is not None:
                templates.add(str(_constant(call.args[0])))
            prompt_name = _constant(_keyword(call, "prompt_name"))
            if prompt_name is not None:
                templates.add(prompt_name)
    return roles, templates


def prompt_files() -> set[str]:
    return {path.stem for path in PROMPTS.glob("*.txt")}


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda pipeline: pipeline.id)
def test_the_registry_names_exactly_the_roles_and_templates_the_pipeline_uses(pipeline: Pipeline) -> None:
    roles, templates = named_in(pipeline.modules)
    assert roles == set(pipeline.roles)
    assert templates == set(pipeline.prompts)
    assert len(set(pipeline.roles)) == len(pipeline.roles) and len(set(pipeline.prompts)) == len(
        pipeline.prompts
    )


def test_the_collector_sees_roles_passed_through_helpers() -> None:
    """AgentSimp's architect and proofreader are asked through _rework, its repair through finalize."""
    roles, templates = named_in(("margin.workflows.rewrite.agentsimp",))
    assert {"architect", "proofreader", "simplifier"} <= roles
    assert {"architect", "proofreader", "content_simplifier"} <= templates
    assert "simplifier" not in templates  # AgentSimp's simplifier reads content_simplifier
    assert named_in(("margin.workflows.rewrite.safety",)) == (set(), {"repair"})


def test_every_role_any_workflow_names_is_a_known_role() -> None:
    modules = sorted(
        "margin." + ".".join(path.relative_to(REPO).with_suffix("").parts)
        for path in (REPO / "workflows").rglob("*.py")
        if path.name != "__init__.py"
    )
    roles, _ = named_in(tuple(modules))
    assert roles - set(ROLES) == set()
    assert registry.DOCTOR in ROLES


def test_every_template_named_exists_and_every_prompt_file_is_named() -> None:
    files = prompt_files()
    named = {name for pipeline in PIPELINES for name in pipeline.prompts} | set(COMMON_PROMPTS)
    assert named - files == set(), "templates named that have no prompts/NAME.txt"
    assert files - named == set(), "prompt files no pipeline names"
    # The common part is what role_prompt appends to every role's prompt.
    assert named_in(("margin.workflows.prompts",))[1] == set(COMMON_PROMPTS)


def test_ids_are_unique_and_agree_with_the_evaluation_and_the_transcripts() -> None:
    ids = [pipeline.id for pipeline in PIPELINES]
    eval_ids = [pipeline.eval_id for pipeline in PIPELINES]
    methods = [pipeline.method for pipeline in PIPELINES if pipeline.method is not None]
    assert len(set(ids)) == len(ids)
    assert len(set(eval_ids)) == len(eval_ids)
    assert len(set(methods)) == len(methods) and tuple(methods) == registry.SIMPLIFY_METHODS
    assert sorted(METHODS) == sorted(eval_ids)
    assert dict(zip(ids, PIPELINES, strict=True)) == registry.BY_ID
    assert dict(zip(eval_ids, PIPELINES, strict=True)) == registry.BY_EVAL_ID
    assert {pipeline.command for pipeline in PIPELINES} == {"review", "simplify", "lay"}
    assert len(ROLES) == len(set(ROLES))
    assert set(ROLES) == {role for pipeline in PIPELINES for role in pipeline.roles} | set(registry.OWN_ROLES)


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda pipeline: pipeline.id)
def test_a_pipeline_saves_its_transcripts_under_its_id(pipeline: Pipeline) -> None:
    """Transcript(NAME) in the pipeline's modules names the registry's constant for its own id."""
    names = [
        call.args[0]
        for module in pipeline.modules
        for call in ast.walk(tree(module))
        if isinstance(call, ast.Call) and _name(call) == "Transcript" and call.args
    ]
    for name in names:
        assert isinstance(name, ast.Name), ast.unparse(name)  # a constant of the registry, not a literal
        assert getattr(registry, name.id) == pipeline.id


def test_the_registry_imports_nothing_but_the_standard_library() -> None:
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import margin.workflows.registry\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    new = json.loads(completed.stdout)
    ours = {"margin", "margin.workflows", "margin.workflows.registry"}
    others = [name for name in new if name not in ours and name.split(".")[0] not in sys.stdlib_module_names]
    assert others == []
    assert {name for name in new if name.startswith("margin")} <= ours
