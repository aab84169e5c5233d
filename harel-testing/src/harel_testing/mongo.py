"""What a real MongoDB server demands of a request and mongomock does not check.

Test support (``pip install harel-testing[mongo]``, which also brings mongomock and
mongomock-motor); ``harel_store_mongo.testing`` imports it when a plan test runs.

mongomock is more lenient than a server (it applies an update that sets and unsets one field,
ignores index options, and leaves expressions inside array literals unevaluated), so the tests
pass every request the plans send through :func:`violations`: an empty list means a MongoDB
server (4.2+) accepts the request and evaluates it as mongomock did.  The rules:

* a classic update document uses known operators and touches no path twice (no ``$set`` and
  ``$unset`` of one field, no ``a`` with ``a.b``);
* an update pipeline uses only the stages updates allow, each ``$set`` / ``$project`` names
  distinct, non-overlapping top-level fields, and every expression is built from known
  operators, the store's own field paths and ``$literal`` values: a caller's string is never
  read as a field path (``"$x"``) or an operator, and no object or array literal holds an
  expression (a server would evaluate it, mongomock would store it);
* a filter uses known query operators only (``$or`` / ``$nor`` of such filters at the top
  level), and no key comes from a caller;
* ``$not`` is never used (mongomock reads its argument list wrongly) and a ``$slice`` count
  fits 32 bits.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from harel_store_mongo._requests import INT32_MAX, Request
from harel_store_mongo._schema import INDEXES

UPDATE_OPERATORS = frozenset({"$set", "$unset", "$inc", "$setOnInsert", "$push", "$pull", "$min"})
PIPELINE_STAGES = frozenset({"$set", "$addFields", "$project", "$unset", "$replaceRoot"})
EXPRESSION_OPERATORS = frozenset(
    {
        "$literal",
        "$ifNull",
        "$and",
        "$concatArrays",
        "$filter",
        "$min",
        "$max",
        "$add",
        "$slice",
        "$cond",
        "$in",
        "$eq",
        "$ne",
        "$or",
        "$lt",
        "$lte",
        "$gt",
        "$gte",
        "$size",
    }
)
FILTER_ARGUMENTS = frozenset({"input", "cond", "as", "limit"})
QUERY_OPERATORS = frozenset(
    {
        "$eq",
        "$ne",
        "$gt",
        "$gte",
        "$lt",
        "$lte",
        "$in",
        "$exists",
        "$type",
        "$elemMatch",
        "$all",
        "$regex",
    }
)
AGGREGATE_STAGES = frozenset({"$match", "$sort", "$limit", "$project"})
FIELDS = frozenset(
    {
        "_id",
        "version",
        "token",
        "data",
        "definition_id",
        "status",
        "parent_id",
        "outcome",
        "active_path",
        "updated_at",
        "outbox",
        "outbox_next",
        "spawns",
        "spawns_next",
        "timers",
        "timers_next",
        "processed",
        "marks_since",
        "trace",
        "trace_next",
        "n",
        "old",
        "marks_n",
        "marks_out",
        "mf",
        "mf_n",
        "mf_live",
        "mf_gen",
        "e",
        "at",
        "priority",
        "ready_at",
        "owner",
        "tn",
        "seq_hi",
        *(f"r{slot}" for slot in range(8)),
    }
)
ELEMENT_FIELDS = frozenset({"seq", "target", "event", "child", "root", "context", "path", "at"})
"""Fields of array elements (and ``at`` is also a top-level field of ``marks``)."""
FIELD_PATHS = frozenset(
    {f"${name}" for name in FIELDS}
    | {
        f"${array}.{item}"
        for array in ("outbox", "spawns", "timers", "processed")
        for item in ELEMENT_FIELDS
    }
    | {f"$$this.{item}" for item in ELEMENT_FIELDS}
)
"""Every field path an expression may name (``$$this`` is a ``$filter`` element)."""


def _overlaps(paths: Iterable[str]) -> list[str]:
    seen = sorted(paths)
    problems = []
    for a, b in itertools.pairwise(seen):
        if a == b or b.startswith(a + "."):
            problems.append(f"paths {a!r} and {b!r} conflict")
    return problems


def _expression(value: Any, where: str) -> list[str]:
    """Problems of one aggregation expression."""
    if isinstance(value, str):
        if value.startswith("$") and value not in FIELD_PATHS:
            return [f"{where}: {value!r} would be read as a field path; wrap data in $literal"]
        return []
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _expression(item, f"{where}[{i}]")]
    if isinstance(value, dict):
        if len(value) == 1:
            ((operator, argument),) = value.items()
            if operator == "$literal":
                return _literal(argument, where)
            if operator == "$not":
                return [f"{where}: $not (spell it {{$eq: [condition, false]}})"]
            if operator == "$slice" and isinstance(argument, list) and len(argument) == 2:
                count = argument[1]
                if not isinstance(count, int) or abs(count) > INT32_MAX:
                    return [f"{where}: $slice count {count!r} is not a 32-bit int"]
            if operator == "$filter":
                if not isinstance(argument, dict) or not set(argument) <= FILTER_ARGUMENTS:
                    return [f"{where}: malformed $filter"]
                return [
                    p for key, item in argument.items() for p in _expression(item, f"{where}.{key}")
                ]
            if operator in EXPRESSION_OPERATORS:
                return _expression(argument, f"{where}.{operator}")
        return [f"{where}: an object literal {sorted(value)} inside an expression; use $literal"]
    if value is None or isinstance(value, (bool, int, float)):
        return []
    return [f"{where}: {type(value).__name__} is not an expression"]


def _literal(value: Any, where: str) -> list[str]:
    """A literal's stored documents must have plain field names."""
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _literal(item, f"{where}[{i}]")]
    if isinstance(value, dict):
        problems = []
        for key, item in value.items():
            if not isinstance(key, str) or key.startswith("$") or "." in key:
                problems.append(f"{where}: field name {key!r} cannot be stored")
            problems += _literal(item, f"{where}.{key}")
        return problems
    return []


def _stage_fields(stage: dict[str, Any], where: str) -> list[str]:
    problems = _overlaps(stage)
    for name, value in stage.items():
        if name.startswith("$") or name not in FIELDS:
            problems.append(f"{where}: unknown field {name!r}")
        if name == "_id" and value == 1:
            continue
        problems += _expression(value, f"{where}.{name}")
    return problems


def pipeline_violations(pipeline: list[dict[str, Any]]) -> list[str]:
    """Problems of an update pipeline."""
    problems = []
    for index, stage in enumerate(pipeline):
        if len(stage) != 1:
            problems.append(f"stage {index} names {len(stage)} stages")
            continue
        ((name, body),) = stage.items()
        where = f"stage {index} {name}"
        if name not in PIPELINE_STAGES:
            problems.append(f"{where}: not allowed in an update pipeline")
        elif name in ("$set", "$addFields", "$project") and isinstance(body, dict):
            problems += _stage_fields(body, where)
        else:
            problems.append(f"{where}: unexpected body {body!r:.60}")
    return problems


def update_violations(update: dict[str, Any]) -> list[str]:
    """Problems of a classic update document (operators and conflicting paths)."""
    problems = []
    paths = []
    for operator, fields in update.items():
        if operator not in UPDATE_OPERATORS:
            problems.append(f"unknown update operator {operator!r}")
            continue
        paths += list(fields)
    return problems + _overlaps(paths)


def filter_violations(query: Any, where: str = "filter") -> list[str]:
    """Problems of a query filter: known operators, field names of the store only."""
    if not isinstance(query, dict):
        return [f"{where}: not a document"]
    problems = []
    for key, value in query.items():
        if key in ("$or", "$nor") and isinstance(value, list) and value:
            problems += [
                p for i, q in enumerate(value) for p in filter_violations(q, f"{where}[{i}]")
            ]
            continue
        if key.startswith("$"):
            problems.append(f"{where}: top-level operator {key!r}")
            continue
        root = key.split(".", 1)[0]
        if root not in FIELDS or (key != root and key.split(".", 1)[1] not in ELEMENT_FIELDS):
            problems.append(f"{where}: unknown field {key!r}")
        problems += _condition(value, f"{where}.{key}")
    return problems


def _condition(value: Any, where: str) -> list[str]:
    if not isinstance(value, dict):
        return []  # an equality: a plain value
    problems = []
    for operator, argument in value.items():
        if operator not in QUERY_OPERATORS:
            problems.append(f"{where}: {operator!r} is not a query operator")
        elif operator == "$elemMatch":
            problems += [
                p for k, v in argument.items() for p in _condition(v, f"{where}.$elemMatch.{k}")
            ]
        elif operator == "$regex" and not (
            isinstance(argument, str) and argument.isascii() and argument.startswith("^")
        ):
            problems.append(f"{where}: $regex {argument!r:.40} is not an anchored pattern")
        elif operator == "$all":
            problems += [p for i, v in enumerate(argument) for p in _condition(v, f"{where}[{i}]")]
    return problems


def violations(request: Request) -> list[str]:
    """Everything a real server would refuse or read differently in ``request``."""
    method, args = request.method, request.args
    if method == "bulk_write":  # (filter, update) pairs, each an update_one
        return [
            problem
            for pair in args[0]
            for problem in violations(Request(request.collection, "update_one", tuple(pair)))
        ]
    if method in ("update_one", "update_many", "find_one_and_update"):
        query, update = args
        found = filter_violations(query)
        if isinstance(update, list):
            return found + pipeline_violations(update)
        return found + update_violations(update)
    if method in ("find_one", "find", "delete_one", "delete_many"):
        return filter_violations(args[0])
    if method == "aggregate":
        problems = []
        for stage in args[0]:
            ((name, body),) = stage.items()
            if name not in AGGREGATE_STAGES:
                problems.append(f"aggregate stage {name!r}")
            elif name == "$match":
                problems += filter_violations(body, "$match")
            elif name == "$project":
                problems += _stage_fields(body, "$project")
        return problems
    if method == "create_indexes":
        return [
            problem
            for spec in args[0]
            for problem in (
                [] if spec in INDEXES else [f"index {spec!r} is not declared in _schema"]
            )
        ]
    return []
