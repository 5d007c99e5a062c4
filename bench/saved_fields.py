"""The fields of a saved bench document that ``--from`` reads, with the types the table and
the plot need: a hand-edited, truncated or foreign document is one line naming the first
field that is wrong (``results[2].tflops``), never a traceback from deep in the rendering."""

from __future__ import annotations

from collections.abc import Callable

Check = tuple[Callable[[object], bool], str]  # (accepts the value, what was expected)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


TEXT: Check = (lambda v: isinstance(v, str), "a string")
TEXT_OR_NULL: Check = (lambda v: v is None or isinstance(v, str), "a string or null")
NUMBER: Check = (_number, "a number")
NUMBER_OR_NULL: Check = (lambda v: v is None or _number(v), "a number or null")
FLAG: Check = (lambda v: isinstance(v, bool), "true or false")
FLAG_OR_NULL: Check = (lambda v: v is None or isinstance(v, bool), "true, false or null")
ANY: Check = (lambda v: True, "a value")

# What the table (report.print_tables) and the plot (plot.render_png) read of each row; row
# keys are hashed and rendered, so they must be strings.
_KEYS = {name: TEXT for name in ("shape", "load", "weights", "phase", "impl")}
ROWS: dict[str, dict[str, Check]] = {
    "shapes": {"name": TEXT, "model": ANY, "experts": ANY, "hidden": ANY, "ffn": ANY, "rows": ANY},
    "results": {
        **_KEYS,
        "status": TEXT,
        "reason": ANY,
        "median_ms": NUMBER_OR_NULL,
        "tflops": NUMBER_OR_NULL,
        "gbps": NUMBER_OR_NULL,
        "repeats": ANY,
        "wall_s": NUMBER,
        "warmup_s": NUMBER_OR_NULL,
    },
    "ratios": {**_KEYS, "reference": TEXT, "value": NUMBER_OR_NULL},
    "targets": {
        "text": TEXT,
        "load": TEXT,
        "weights": TEXT,
        "value": NUMBER_OR_NULL,
        "threshold": ANY,
        "met": FLAG_OR_NULL,
        "note": TEXT_OR_NULL,
    },
}
TABLES: dict[str, dict[str, Check]] = {
    "environment": {"device_name": ANY, "timing": ANY},
    "settings": {"dtype": ANY},
}


def _check(where: str, value: object, check: Check) -> str | None:
    accepts, expected = check
    return None if accepts(value) else f"{where} is {value!r:.60}, expected {expected}"


def top_level_problem(doc: dict) -> str | None:
    """What is wrong with the document's own fields, or None (read before ``with_layouts``,
    which walks the rows)."""
    for name, check in (("comparable", FLAG), ("wall_s", NUMBER)):
        if problem := _check(name, doc[name], check):
            return problem
    for name, fields in TABLES.items():
        if not isinstance(doc[name], dict):
            return f"{name} is {doc[name]!r:.60}, expected an object"
        missing = [f for f in fields if f not in doc[name]]
        if missing:
            return f"{name} has no {missing[0]!r}"
    for name in ROWS:
        if not isinstance(doc[name], list):
            return f"{name} is {doc[name]!r:.60}, expected a list"
    return None


def rows_problem(doc: dict) -> str | None:
    """What is wrong with the first bad row, or None."""
    for name, fields in ROWS.items():
        for index, row in enumerate(doc[name]):
            where = f"{name}[{index}]"
            if not isinstance(row, dict):
                return f"{where} is {row!r:.60}, expected an object"
            for field, check in fields.items():
                if field not in row:
                    return f"{where} has no {field!r}"
                if problem := _check(f"{where}.{field}", row[field], check):
                    return problem
    shapes = {row["name"] for row in doc["shapes"]}
    for index, row in enumerate(doc["results"]):
        if row["shape"] not in shapes:
            return f"results[{index}].shape {row['shape']!r} names no entry of shapes"
    return None
