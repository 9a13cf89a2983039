"""What a Letta suite writes in Python or hands to an agent, as evalsite can carry it: custom graders and
extractors as `code` checks in the `letta` dialect, a custom reward that is a weighted sum of grader scores
as a weighted pass rule, and the plain-text facts of an agent (`agent_args`, an .af file's system prompt
and memory blocks) as a system message."""

from __future__ import annotations

import ast
import json
import math

import yaml

from ..common import Report, attach, basename, find_file, short

# Letta's built-in extractors evalsite reads itself (the tool ones from the calls it records); the others
# read an agent's memory, which a chat model does not have.
TOOL_EXTRACTORS = ("tool_arguments", "tool_output")
NO_AGENT_STATE = ("memory_block", "last_compaction")
BUILTIN_EXTRACTORS = (
    "last_assistant",
    "first_assistant",
    "all_assistant",
    "last_turn",
    "pattern",
    "after_marker",
)


def is_custom(reference: object) -> bool:
    """A `file.py:function` (or `module:function`) reference to the user's own Python."""
    return isinstance(reference, str) and ":" in reference


def function_ref(reference: str) -> str:
    """`../graders/check.py:grade` as a code check's `module:function` from the suite's folder."""
    path, _, function = reference.strip().rpartition(":")
    module = basename(path).removesuffix(".py")
    return f"{module}:{function}"


def python_file(reference: str) -> str:
    path = reference.strip().rpartition(":")[0]
    name = basename(path)
    return name if name.endswith(".py") else f"{name}.py"


def attach_python(
    reference: str, where: str, files: dict[str, str], attached: dict[str, str], report: Report
) -> str:
    """The Python file a reference names, attached to the suite (listed as needed when not uploaded); the
    reference as a code check's `module:function`, its module renamed (`grade_2`) when another file of that
    name, from another folder, is attached already."""
    name = python_file(reference)
    path, _, function = reference.strip().rpartition(":")
    found = find_file(files, path if path.endswith(".py") else name)
    if found is None:
        report.need(name)
        report.skip(f"{where}: {name} was not uploaded — upload it with the suite for the code check to run")
        return function_ref(reference)
    attached_as = attach(attached, name, found[1])
    if attached_as != name:
        report.map(f"{where}: {path} → attached as {attached_as} ({name} is another file of that name)")
    return f"{attached_as.removesuffix('.py')}:{function}"


def renamed(value: object, old: str, new: str) -> object:
    """`value` with every string equal to `old` (a `module:function` reference) made `new`."""
    if value == old:
        return new
    if isinstance(value, dict):
        return {key: renamed(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [renamed(item, old, new) for item in value]
    return value


def code_check(spec: dict, *, threshold: float) -> tuple[dict, list[str]] | None:
    """A Letta tool grader that runs Python (its function, or a built-in one after a custom extractor) as a
    `code` check in the letta dialect, with the references it needs; None when it has none to run."""
    function = spec.get("function")
    extractor = spec.get("extractor", "last_assistant")
    config: dict = {}
    if isinstance(spec.get("extractor_config"), dict):
        config["extractor_config"] = spec["extractor_config"]
    if is_custom(function):
        called, references = function_ref(function), [function]
        if extractor != "last_assistant":
            config["extractor"] = function_ref(extractor) if is_custom(extractor) else extractor
            if is_custom(extractor):
                references.append(extractor)
    elif is_custom(extractor) and isinstance(function, str):
        called, references = function_ref(extractor), [extractor]
        config["grader"] = function
    else:
        return None
    code = {"function": called, "dialect": "letta", "threshold": threshold}
    if config:
        code["config"] = config
    return {"code": code}, references


# --- reward ---------------------------------------------------------------------------------------------


def reward_weights(
    reward: dict, files: dict[str, str], graders: set[str]
) -> tuple[dict[str, float] | None, str]:
    """A custom reward composer that returns a weighted sum of grader scores (`0.7 * quality + 0.3 *
    ascii_only`, a bare RewardOutput or float) as {grader: weight}; else None and why not."""
    reference = reward.get("function")
    if not isinstance(reference, str) or ":" not in reference:
        return None, f"function {short(reference)} is not file.py:function"
    found = find_file(files, python_file(reference))
    if found is None:
        return None, f"{python_file(reference)} was not uploaded"
    name = reference.rpartition(":")[2]
    try:
        tree = ast.parse(found[1])
    except SyntaxError as exc:
        return None, f"{found[0]} is not valid Python: {exc.msg}"
    body = next(
        (
            node
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
        ),
        None,
    )
    if body is None:
        return None, f"{found[0]} has no function {name}"
    scores = _score_names(body)
    statements = [
        node
        for node in body.body
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
    ]
    simple = statements and isinstance(statements[-1], ast.Return) and statements[-1].value is not None
    if not simple or any(not (isinstance(n, ast.Assign) and _grade_ref(n.value)) for n in statements[:-1]):
        return None, "it is not one weighted sum of grader scores (it branches or computes more)"
    value = statements[-1].value
    if isinstance(value, ast.Call) and value.args:  # RewardOutput(score=...) or RewardOutput(...)
        value = value.args[0]
    elif isinstance(value, ast.Call):
        value = next((kw.value for kw in value.keywords if kw.arg == "score"), None)
    weights: dict[str, float] = {}
    if value is None or not _linear(value, scores, weights, 1.0):
        return None, "it is not one weighted sum of grader scores (it branches or computes more)"
    unknown = sorted(set(weights) - graders)
    if unknown:
        return None, f"it weighs {', '.join(unknown)}, not a converted grader"
    if not weights or any(weight <= 0 for weight in weights.values()):
        return None, "its weights are not all above 0"
    return weights, ""


def _score_names(function: ast.AST) -> dict[str, str]:
    """`quality = ctx.grades["quality"].score` assignments: variable -> grader."""
    names = {}
    for node in function.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            grader = _grade_ref(node.value)
            if grader:
                names[node.targets[0].id] = grader
    return names


def _grade_ref(node: ast.AST) -> str | None:
    """The grader of `ctx.grades["name"].score`."""
    if isinstance(node, ast.Attribute) and node.attr == "score" and isinstance(node.value, ast.Subscript):
        key = node.value.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _linear(node: ast.AST, names: dict[str, str], weights: dict[str, float], factor: float) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _linear(node.left, names, weights, factor) and _linear(node.right, names, weights, factor)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for number, term in ((node.left, node.right), (node.right, node.left)):
            if isinstance(number, ast.Constant) and isinstance(number.value, (int, float)):
                return _linear(term, names, weights, factor * float(number.value))
        return False
    grader = names.get(node.id) if isinstance(node, ast.Name) else _grade_ref(node)
    if grader is None:
        return False
    weights[grader] = weights.get(grader, 0.0) + factor
    return True


# --- agent facts ----------------------------------------------------------------------------------------


def finite(value: object) -> object:
    """The value with NaN and infinities written as text: a suite holds finite numbers only."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value


def agent_args_text(agent_args: object) -> str | None:
    """A row's agent_args as the plain text an agent would have been given: each set value under its key
    path, lists one item a line. None when nothing in it is set."""
    if isinstance(agent_args, dict):  # the agent's own tags label it; they are nothing it reads
        agent_args = {key: value for key, value in agent_args.items() if key != "tags"}
    cleaned = _prune(agent_args)
    if not cleaned:
        return None
    dumped = yaml.safe_dump(
        cleaned, allow_unicode=True, sort_keys=False, width=10_000, default_flow_style=False
    )
    return "Facts this conversation's agent was given (Letta agent_args):\n" + dumped.rstrip()


def _prune(value: object) -> object:
    if isinstance(value, dict):
        pruned = {str(key): _prune(item) for key, item in value.items()}
        return {key: item for key, item in pruned.items() if item not in (None, "", [], {})}
    if isinstance(value, list):
        return [item for item in (_prune(entry) for entry in value) if item not in (None, "", [], {})]
    return value


def _memory_text(system: str | None, blocks: list[dict]) -> str | None:
    """A system prompt with memory blocks (label, description, value) as Letta puts them in the context."""
    parts = [system.strip()] if isinstance(system, str) and system.strip() else []
    rendered = []
    for block in blocks:
        label = str(block.get("label") or "block")
        lines = [f"<{label}>"]
        if block.get("description"):
            lines += ["<description>", str(block["description"]), "</description>"]
        lines += ["<value>", str(block.get("value") or ""), "</value>", f"</{label}>"]
        rendered.append("\n".join(lines))
    if rendered:
        parts.append(
            "<memory_blocks>\nThe following memory blocks are currently engaged in your core memory unit:\n\n"
            + "\n\n".join(rendered)
            + "\n</memory_blocks>"
        )
    return "\n\n".join(parts) or None


def agent_script_facts(
    reference: str, files: dict[str, str], report: Report
) -> tuple[str | None, str | None]:
    """What an agent factory (`agent_script: file.py:function`) writes as plain text into the agent it
    creates: the constant `system`, memory block values and `model` of its `agents.create(...)` call. Values
    computed from the row (agent_args) are not read here; the rows carry those."""
    found = find_file(files, python_file(reference))
    if found is None:
        return None, None
    name = reference.rpartition(":")[2]
    try:
        tree = ast.parse(found[1])
    except SyntaxError:
        return None, None
    factory = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
        ),
        None,
    )
    create = next(
        (
            n
            for n in ast.walk(factory or tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "create"
            and any(kw.arg in ("model", "memory_blocks", "system") for kw in n.keywords)
        ),
        None,
    )  # fmt: skip
    if create is None:
        return None, None
    keywords = {kw.arg: kw.value for kw in create.keywords if kw.arg}

    def constant(node: ast.AST | None) -> str | None:
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

    blocks, computed = [], []
    listed = keywords.get("memory_blocks")
    for item in listed.elts if isinstance(listed, ast.List) else []:
        fields = (
            {kw.arg: kw.value for kw in item.keywords if kw.arg}
            if isinstance(item, ast.Call)
            else {constant(k): v for k, v in zip(item.keys, item.values, strict=False)}
            if isinstance(item, ast.Dict)
            else {}
        )
        label, value = constant(fields.get("label")), constant(fields.get("value"))
        if label is not None and value is not None:
            blocks.append(
                {"label": label, "value": value, "description": constant(fields.get("description"))}
            )
        elif label is not None:
            computed.append(label)
    where = f"target.agent_script {reference}"
    system = _memory_text(constant(keywords.get("system")), blocks)
    if system is not None:
        report.map(f"{where}: the agent's constant system prompt and memory blocks → system")
    if computed:
        report.skip(
            f"{where}: memory blocks {', '.join(computed)} are computed per row; the rows' agent_args carry their facts"
        )
    return system, constant(keywords.get("model"))


def agent_file_facts(name: str, text: str, report: Report) -> tuple[str | None, str | None]:
    """An .af agent file's plain-text facts: its system prompt with its memory blocks (as Letta puts them in
    the agent's context), and its model. Its tools, files and stored messages are reported, not run."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        report.skip(f"{name}: not an agent file evalsite can read ({exc}); its system prompt is not carried")
        return None, None
    agents = data.get("agents") if isinstance(data, dict) else None
    if not isinstance(agents, list) or not agents or not isinstance(agents[0], dict):
        report.skip(f"{name}: no agent in it; nothing carried")
        return None, None
    agent = agents[0]
    blocks = {b.get("id"): b for b in data.get("blocks") or [] if isinstance(b, dict)}
    wanted = [blocks[i] for i in agent.get("block_ids") or [] if i in blocks]
    wanted += [b for b in agent.get("memory_blocks") or [] if isinstance(b, dict)]
    system = _memory_text(agent.get("system") if isinstance(agent.get("system"), str) else None, wanted)
    if wanted:
        report.map(
            f"{name}: memory blocks {', '.join(str(b.get('label')) for b in wanted)} → the system message"
        )
    if system is not None:
        report.map(f"{name}: the agent's system prompt → system")
    tools = [t.get("name") for t in data.get("tools") or [] if isinstance(t, dict) and t.get("name")]
    if tools:
        report.skip(f"{name}: the agent's tools ({', '.join(tools)}) run on Letta's server; the ones the graders "
                    "read are offered to the model (tools), the others are not")  # fmt: skip
    history = [m for m in agent.get("messages") or [] if isinstance(m, dict) and m.get("role") != "system"]
    if history:
        report.lose(
            f"{name}: {len(history)} stored messages of the agent's history — not carried (only its system "
            "prompt and memory blocks are)"
        )
    config = agent.get("llm_config") if isinstance(agent.get("llm_config"), dict) else {}
    model = config.get("handle") or config.get("model")
    return system, (model if isinstance(model, str) and model else None)
