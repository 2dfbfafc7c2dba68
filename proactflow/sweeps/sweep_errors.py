"""A sweep file's validation error as the one line a user reads: where (the entry by its place
and model, the key) and what the value should have been, in TOML's words. Apart from the file's
model (sweep_file.py) because it knows pydantic's error shapes, not the file's keys."""

from __future__ import annotations

from typing import Any

_EXPECTED = {"bool_type": "true or false", "string_type": "a string",
             "float_type": "a number", "int_type": "a whole number",
             "int_from_float": "a whole number", "finite_number": "a finite number",
             "list_type": "a list", "dict_type": "a table"}
"""What a value of the wrong type should have been, in TOML's words."""
_MEMBER_TAGS = {"str", "bool", "int", "float"}
"""How pydantic names a union's member in an error's location."""


def problem_line(data: dict[str, Any], errors: list[Any]) -> str:
    """The first validation error as `models[2] (openai/my-model): concurrency: <why>`: an
    entry by its place in the file (counted from 1, as a reader counts [[models]] blocks) and
    its model. A value that fits none of a union's types (`str | bool`) is one error, naming
    what each would take."""
    error = errors[0]
    loc = list(error["loc"])
    union = [other for other in errors[1:] if list(other["loc"][:-1]) == loc[:-1]
             and other["loc"][-1] in _MEMBER_TAGS and other["type"] in _EXPECTED]
    if union and loc[-1] in _MEMBER_TAGS and error["type"] in _EXPECTED:
        loc = loc[:-1]  # the union member's tag ("str", "bool"), not a key of the file
        error = {**error, "type": "union",
                 "msg": "expected " + " or ".join(_EXPECTED[e["type"]]
                                                  for e in [error, *union])}
    elif error["type"] in _EXPECTED:
        error = {**error, "msg": f"expected {_EXPECTED[error['type']]}"}
    elif error["type"] == "value_error":
        error = {**error, "msg": str(error["ctx"]["error"])}
    where = []
    if len(loc) >= 2 and loc[0] in ("models", "judges") and isinstance(loc[1], int):
        entries = data.get(loc[0])
        entry = entries[loc[1]] if isinstance(entries, list) else None
        model = entry.get("model") if isinstance(entry, dict) else None
        where.append(f"{loc[0]}[{loc[1] + 1}]" + (f" ({model})" if isinstance(model, str)
                                                  else ""))
        loc = loc[2:]
    where.append(".".join(str(part) for part in loc) or "(file)")
    if error["type"] == "extra_forbidden":
        return f"{': '.join(where)}: unknown key"
    value = error["input"]
    shown = str(value).lower() if isinstance(value, bool) else repr(value)  # as TOML writes it
    given = f", got {shown}" if loc and not isinstance(value, dict) else ""
    return f"{': '.join(where)}: {error['msg']}{given}"
