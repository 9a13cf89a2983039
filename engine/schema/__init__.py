"""The suite format, defined once.

Everything that reads a suite goes through these pydantic models: the YAML loader, the editor's live
validation, the API, the JSON Schema export served to editors and the docs. Unknown keys are errors.

One module per noun: `checks` (the check vocabulary and `checks` lists; `tool_checks`, the tool checks'
keys), `conditions` (stop conditions of simulated conversations), `grading` (graders, extractors, rubrics),
`evals` (one conversation and its parts), `suite` (the whole file and its JSON Schema); `base` holds what
they share. Import from `engine.schema`: every public name is here.
"""

from .base import LocatedError, StrictModel
from .checks import (
    CHECK_KEYS,
    DEFAULT_EMBEDDING_MODEL,
    MAX_CODE_TIMEOUT,
    MAX_FOLLOWUP_DEPTH,
    SCALES,
    Check,
    CheckFields,
    CodeSpec,
    Criterion,
    FieldEquals,
    JudgeSpec,
    SemanticSpec,
    followup_depth,
)
from .conditions import CONDITION_KEYS, Condition, NaturalLanguage
from .evals import (
    ContentPart,
    Eval,
    FollowUpInput,
    Message,
    PersonaStage,
    ScriptedTurn,
    Simulate,
    Style,
)
from .grading import (
    EXTRACTORS,
    GRADER_KINDS,
    GRADERS,
    GROUND_TRUTH_KINDS,
    RUBRIC_PLACEHOLDERS,
    Extractor,
    Grader,
    NamedGrader,
    PassRule,
    WeightedPassRule,
    check_patterns,
    check_rubric,
)
from .settings import REASONING_EFFORTS, CacheRoles, ModelSettings
from .suite import Gate, Metadata, MockRule, MockSpec, Suite, json_schema
from .tool_checks import ToolCalled, ToolCallPattern, ToolNotCalled, ToolResult, ToolSequence
from .tools import (
    DEFAULT_MAX_TOOL_ROUNDS,
    LlmTool,
    McpServer,
    Tool,
    ToolEntry,
    ToolItem,
    ToolRule,
    tool_names,
)

__all__ = [
    "REASONING_EFFORTS",
    "CacheRoles",
    "ModelSettings",
    "DEFAULT_MAX_TOOL_ROUNDS",
    "LlmTool",
    "McpServer",
    "Tool",
    "ToolEntry",
    "ToolItem",
    "ToolRule",
    "tool_names",
    "ToolCalled",
    "ToolCallPattern",
    "ToolNotCalled",
    "ToolResult",
    "ToolSequence",
    "CHECK_KEYS",
    "CONDITION_KEYS",
    "DEFAULT_EMBEDDING_MODEL",
    "MAX_CODE_TIMEOUT",
    "EXTRACTORS",
    "GRADERS",
    "MAX_FOLLOWUP_DEPTH",
    "RUBRIC_PLACEHOLDERS",
    "SCALES",
    "Check",
    "CheckFields",
    "Condition",
    "ContentPart",
    "Criterion",
    "Eval",
    "Extractor",
    "CodeSpec",
    "FieldEquals",
    "FollowUpInput",
    "GRADER_KINDS",
    "GROUND_TRUTH_KINDS",
    "Gate",
    "Grader",
    "NamedGrader",
    "PassRule",
    "WeightedPassRule",
    "JudgeSpec",
    "LocatedError",
    "Message",
    "Metadata",
    "MockRule",
    "MockSpec",
    "NaturalLanguage",
    "PersonaStage",
    "ScriptedTurn",
    "SemanticSpec",
    "Simulate",
    "Style",
    "StrictModel",
    "Suite",
    "check_patterns",
    "check_rubric",
    "followup_depth",
    "json_schema",
]
