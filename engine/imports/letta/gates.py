"""A Letta gate (simple, weighted average or logical AND of conditions) as evalsite gates, with the
per-sample pass threshold it carries."""

from __future__ import annotations

from ..common import Report, as_name, as_number, as_share, short

AGGREGATIONS = {"avg_score": "avg", "avg": "avg", "min": "min", "p95": "p95", "accuracy": "accuracy"}
OPS = {"gte": ">=", "gt": ">", "lte": "<=", "lt": "<", "eq": "==", ">=": ">=", ">": ">", "<=": "<=", "<": "<"}
OPS["=="] = "=="


def gate_text(gate: object) -> str:
    """A Letta gate in a few words: `answer_check avg_score gte 0.6`, `all of (...)`."""
    if not isinstance(gate, dict):
        return short(gate)
    if gate.get("kind") == "logical":
        conditions = gate.get("conditions") if isinstance(gate.get("conditions"), list) else []
        joined = f" {gate.get('operator', 'and')} ".join(gate_text(c) for c in conditions)
        return f"({joined})"
    if gate.get("kind") == "weighted_average":
        weights = gate.get("weights") if isinstance(gate.get("weights"), dict) else {}
        mix = " + ".join(f"{w}×{k}" for k, w in weights.items())
        return (
            f"weighted {gate.get('aggregation', 'avg_score')} of {mix} {gate.get('op')} {gate.get('value')}"
        )
    aggregation = gate.get("aggregation", gate.get("metric", "avg_score"))
    text = f"{gate.get('metric_key', '')} {aggregation} {gate.get('op')} {gate.get('value')}".strip()
    if gate.get("pass_threshold") is not None:
        text += f" (pass_threshold {gate['pass_threshold']})"
    return text


def convert_gate(gate: object, primary: str, report: Report) -> tuple[list[dict], float | None, str]:
    if gate is None:
        return [], None, ""
    if not isinstance(gate, dict):
        report.lose(f"gate: {short(gate)} — not a mapping")
        return [], None, ""
    kind = gate.get("kind", "simple")
    described = f"Letta gate: {gate_text(gate)}"
    gates: list[dict] = []
    thresholds: list[float] = []
    if kind == "simple":
        converted = _condition(gate, primary, "gate", report)
        if converted:
            gates.append(converted[0])
            if converted[1] is not None:
                thresholds.append(converted[1])
    elif kind == "weighted_average":
        weights = gate.get("weights")
        if isinstance(weights, dict) and set(weights) == {primary}:
            converted = _condition({**gate, "metric_key": primary}, primary, "gate", report)
            if converted:
                gates.append(converted[0])
        else:
            report.lose(
                f"{described} — it weighs graders that were not converted (only {primary} was), so it was left out"
            )
    elif kind == "logical":
        conditions = gate.get("conditions") if isinstance(gate.get("conditions"), list) else []
        operator = gate.get("operator", "and")
        if operator == "or" and len(conditions) > 1:
            members = _conditions(conditions, primary, thresholds, "on one grader — not converted", report)
            if len(members) == len(conditions):
                gates.append({"logical_or": members})  # the eval score is the one grader's score
            else:
                report.lose(f"{described} — not every condition converted, so the OR was left out")
        elif operator not in ("and", "or"):
            report.lose(f"{described} — operator {short(operator)}: evalsite combines gates with and / or")
        else:
            gates += _conditions(conditions, primary, thresholds, "has no evalsite equivalent", report)
            if len(gates) < len(conditions):
                report.lose(
                    "gate: only some conditions were converted, so the evalsite gates are more lenient than Letta's"
                )
    else:
        report.lose(f"{described} — gate kind {short(kind)} has no evalsite equivalent")
    threshold = None
    if thresholds:
        threshold = thresholds[0]
        report.map(
            f"gate pass_threshold {threshold:g} → pass_threshold: {threshold:g} (what counts as a passed row)"
        )
        for other in thresholds[1:]:
            if other != threshold:
                report.lose(
                    f"gate pass_threshold {other:g}: evalsite has one pass threshold; kept {threshold:g}"
                )
    return gates, threshold, described


def _conditions(
    conditions: list, primary: str, thresholds: list[float], nested: str, report: Report
) -> list[dict]:
    """A logical gate's conditions converted, their thresholds added to `thresholds`; a nested logical one is
    lost (`nested` says why)."""
    converted_all = []
    for index, condition in enumerate(conditions):
        where = f"gate.conditions[{index}]"
        if isinstance(condition, dict) and condition.get("kind") == "logical":
            report.lose(f"{where}: a nested logical gate {nested}")
            continue
        converted = _condition(condition, primary, where, report)
        if converted:
            converted_all.append(converted[0])
            if converted[1] is not None:
                thresholds.append(converted[1])
    return converted_all


def _condition(
    condition: object, primary: str, where: str, report: Report
) -> tuple[dict, float | None] | None:
    if not isinstance(condition, dict):
        report.lose(f"{where}: not a mapping")
        return None
    metric_key = condition.get("metric_key")
    if metric_key is not None and metric_key != primary:
        report.lose(
            f"{where} on graders.{metric_key}: that grader was not converted, so neither was this condition"
        )
        return None
    aggregation = condition.get("aggregation", condition.get("metric", "avg_score"))
    metric = AGGREGATIONS.get(aggregation) if isinstance(aggregation, str) else None
    if metric is None:
        report.lose(
            f"{where}: aggregation {short(aggregation)} — evalsite gates have avg_score (avg), min, p95 and accuracy"
        )
        return None
    op = OPS.get(condition.get("op", "gte")) if isinstance(condition.get("op", "gte"), str) else None
    value = as_number(condition.get("value"))
    if op is None or value is None:
        report.lose(f"{where}: needs an op (gte, gt, lte, lt, eq) and a numeric value")
        return None
    shown = gate_text({**condition, "kind": "simple"})
    if metric == "accuracy":
        if value > 1:
            report.map(
                f"{where} ({shown}) → gates: accuracy {op} {value / 100:g} (Letta counts percent, evalsite a share)"
            )
            value = value / 100
        else:
            report.map(f"{where} ({shown}) → gates: accuracy {op} {value:g} (read as a share of rows)")
    else:
        report.map(f"{where} ({shown}) → gates: {metric} {op} {value:g}")
    threshold = condition.get("pass_threshold")
    if threshold is not None and as_share(threshold) is None:
        report.lose(f"{where}.pass_threshold: {short(threshold)} — expected a score from 0 to 1, ignored")
        threshold = None
    if threshold is not None and metric != "accuracy":
        report.skip(f"{where}.pass_threshold: only used by accuracy gates in Letta, ignored")
        threshold = None
    return {"metric": metric, "op": op, "value": value}, threshold


# --- several named graders: the gate kept whole (docs/suite-format.md, gates) --------------------------------


def convert_named_gate(
    gate: object, names: set[str], report: Report, thresholds: dict[str, float]
) -> list[dict]:
    """A Letta gate over named graders as evalsite gates: simple → `{metric, grader, op, value}`,
    weighted_average → `{weighted_average: weights, metric, op, value}`, logical → `logical_and` /
    `logical_or` of its conditions (nested kept). An accuracy condition's pass_threshold becomes that
    grader's threshold (`thresholds`)."""
    if gate is None:
        return []
    converted = _named(gate, names, "gate", report, thresholds, 1)
    if converted is None:
        return []
    report.map(f"gate ({gate_text(gate)}) → gates: {short(converted, 120)}")
    return [converted]


def _named(
    gate: object, names: set[str], where: str, report: Report, thresholds: dict[str, float], depth: int
) -> dict | None:
    if not isinstance(gate, dict):
        report.lose(f"{where}: not a mapping")
        return None
    kind = gate.get("kind", "simple")
    if kind == "logical":
        if depth >= 5:
            report.lose(f"{where}: logical gates nested deeper than 5 levels — not converted")
            return None
        operator = gate.get("operator", "and")
        if operator not in ("and", "or"):
            report.lose(f"{where}: operator {short(operator)} — evalsite combines gates with and / or")
            return None
        conditions = gate.get("conditions") if isinstance(gate.get("conditions"), list) else []
        members = [
            _named(c, names, f"{where}.conditions[{i}]", report, thresholds, depth + 1)
            for i, c in enumerate(conditions)
        ]
        kept = [m for m in members if m is not None]
        if len(kept) < len(members):
            report.lose(
                f"{where}: only some conditions were converted, so this {operator} gate differs from Letta's"
            )
        if not kept:
            return None
        return {f"logical_{operator}": kept}
    aggregation = gate.get("aggregation", gate.get("metric", "avg_score"))
    metric = AGGREGATIONS.get(aggregation) if isinstance(aggregation, str) else None
    op = OPS.get(gate.get("op", "gte")) if isinstance(gate.get("op", "gte"), str) else None
    value = as_number(gate.get("value"))
    if metric is None or op is None or value is None:
        report.lose(
            f"{where} ({gate_text(gate)}): needs an aggregation (avg_score, min, p95, accuracy), an op "
            "(gte, gt, lte, lt, eq) and a numeric value — not converted"
        )
        return None
    if metric == "accuracy" and value > 1:
        value = value / 100
        report.map(
            f"{where}: accuracy {gate.get('value')} → {value:g} (Letta counts percent, evalsite a share)"
        )
    out: dict[str, object]
    if kind == "weighted_average":
        weights = gate.get("weights")
        if not isinstance(weights, dict) or not weights:
            report.lose(f"{where}: a weighted_average gate without weights — not converted")
            return None
        missing = [short(key) for key in weights if as_name(key) not in names]
        if missing:
            report.lose(
                f"{where}: weights name {', '.join(missing)}, which were not converted — gate not converted"
            )
            return None
        bad = [f"{key}: {short(weight)}" for key, weight in weights.items() if as_number(weight) is None]
        if bad:
            report.lose(f"{where}: weights must be numbers ({', '.join(bad)}) — gate not converted")
            return None
        out = {"weighted_average": {str(k): w for k, w in weights.items()}, "metric": metric}
    elif kind == "simple":
        key = gate.get("metric_key")
        if key is None and len(names) == 1:
            key = next(iter(names))
        if as_name(key) not in names:
            report.lose(
                f"{where} on graders.{key}: that grader was not converted, so neither was this condition"
            )
            return None
        out = {"metric": metric, "grader": key}
        threshold = gate.get("pass_threshold")
        if as_share(threshold) is not None:
            if metric == "accuracy":
                thresholds.setdefault(key, threshold)
                if thresholds[key] != threshold:
                    report.lose(
                        f"{where}.pass_threshold {threshold:g}: graders.{key} keeps {thresholds[key]:g}"
                    )
            else:
                report.skip(f"{where}.pass_threshold: only used by accuracy gates in Letta, ignored")
    else:
        report.lose(f"{where}: gate kind {short(kind)} has no evalsite equivalent")
        return None
    out.update({"op": op, "value": value})
    return out
