"""Scenario models' base: the strict pydantic base, shared field types, and error translation.

Every scenario model inherits `Strict` (unknown keys rejected, a description on every field). A
validation error becomes one `ConfigError` line: `FILE:LINE: field 'a.b[2]': message`. Reading YAML with
line numbers is config/yamlfile.py (imported only when a file is read: the commands that fill a scenario
model from flags do not pay for PyYAML).
"""

from __future__ import annotations


from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from simulator.common.errors import UserError


class ConfigError(UserError):
    """A scenario file that cannot be read or validated."""


from typing import Annotated  # noqa: E402

from pydantic import Field  # noqa: E402

from simulator.common import limits as L  # noqa: E402

Batch = Annotated[int, Field(gt=0, le=L.MAX_BATCH)]  # a batch size / capture size
Tokens = Annotated[int, Field(gt=0, le=L.MAX_CTX)]  # a context or length in tokens
Seed = Annotated[int, Field(ge=0, le=L.MAX_SEED)]
Micros = Annotated[float, Field(ge=0, le=L.MAX_US)]


def _admits_bool(ann) -> bool:
    """Whether a field's type takes true/false anywhere (bool itself, or a nested model, which checks its own)."""
    from typing import get_args

    if ann is bool:
        return True
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return True
    return any(_admits_bool(a) for a in get_args(ann) if not isinstance(a, (int, float, str)) or a is bool)


def _bool_text(v):
    if isinstance(v, bool):
        return f"{str(v).lower()} (true/false is not a number)"
    if isinstance(v, (list, tuple)):
        return [_bool_text(x) for x in v]
    if isinstance(v, dict):
        return {_bool_text(k) if isinstance(k, bool) else k: _bool_text(x) for k, x in v.items()}
    return v


def _has_bool(v) -> bool:
    if isinstance(v, bool):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_bool(x) for x in v)
    if isinstance(v, dict):
        return any(_has_bool(k) or _has_bool(x) for k, x in v.items())
    return False


class Strict(BaseModel):
    """Unknown keys refused, frozen, no NaN; and true/false refused where a number is meant (pydantic would read
    `batch: true` or `tensor_parallel_size: true` as 1)."""

    # defer_build: a model's validator is built on its first use, so loading the package builds only the kinds used
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data):
        if isinstance(data, dict):
            for name, v in data.items():
                f = cls.model_fields.get(name) if isinstance(name, str) else None
                if f is None:
                    al = [n for n, x in cls.model_fields.items() if x.validation_alias is not None
                          and name in getattr(x.validation_alias, "choices", [x.validation_alias])]
                    f = cls.model_fields[al[0]] if al else None
                if f is not None and _has_bool(v) and not _admits_bool(f.annotation):
                    # the text the user wrote, so the field's own check refuses it at its exact path and line
                    # ("Input should be a valid integer"), instead of pydantic reading true as 1
                    data = {**data, name: _bool_text(v)}
        return data


def seed_needs_replicates(model) -> None:
    """A seed other than the default 0 given to a kind whose seed draws only the host-noise replicates, with
    replicates 0 (the default): nothing is drawn, so the seed would be ignored. (Seed 0 is what runs anyway: a file's
    `seed: 0` under `--set replicates=0` stays valid.)"""
    if model.seed and not model.replicates:
        raise ValueError("seed draws host noise only for replicates > 0; with none nothing is drawn: give "
                         "replicates, or leave seed out")


def format_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top>"


_TYPE_TAGS = {"str", "int", "float", "bool", "dict", "list", "tuple", "none"}


def _clean(loc) -> tuple:
    """A pydantic error location without the union-branch and validator tags it inserts."""
    return tuple(x for x in loc if not (isinstance(x, str) and (
        x.startswith("function-") or "[" in x or x in _TYPE_TAGS)))


def _named_key(msg: str, lines: dict[tuple, int], loc: tuple) -> tuple[tuple, int] | None:
    """For a rule checked on a whole mapping (`loc`: the scenario, or a nested mapping): the key of that mapping
    which the message names first, among the keys the file sets (`lines`), and its line; None if it names none."""
    import re

    best = None
    for path, line in lines.items():
        if len(path) == len(loc) + 1 and path[: len(loc)] == loc and isinstance(path[-1], str):
            m = re.search(rf"(?<![-\w.]){re.escape(path[-1])}(?![-\w])", msg)
            if m and (best is None or m.start() < best[0]):
                best = (m.start(), path, line)
    return None if best is None else (best[1], best[2])


def validation_error(e: ValidationError, where: str, lines: dict[tuple, int], strip: tuple = ()) -> ConfigError:
    """The first pydantic error as one line naming file, line and the full field path."""
    errs = e.errors()
    # a value that fits no branch of a union (e.g. a preset name or a list of sizes) reports one error per
    # branch; the deepest one says what is actually wrong ("layout[0]: greater than 0", not "not a string")
    err = max(errs, key=lambda x: len(_clean(x["loc"])))
    loc = tuple(err["loc"])
    if strip and loc[: len(strip)] == strip:
        loc = loc[len(strip):]
    loc = _clean(loc)
    line = None
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            line = lines[loc[:n]]
            break
    msg = err["msg"]
    if err["type"] == "value_error":
        msg = msg.removeprefix("Value error, ")
        named = _named_key(msg, lines, loc)
        if named is not None:  # a rule across fields: the first field it names that the file sets, at its line
            loc, line = named
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required field missing"
    elif isinstance(err.get("input"), str) and err["input"].endswith("(true/false is not a number)"):
        msg = f"{err['input'].split(' ', 1)[0]}: true/false is not a number here ({msg})"
    at = f"{where}:{line}" if line else where
    return ConfigError(f"{at}: field '{format_loc(loc)}': {msg}")


def validate_model(cls, data: object, where: str, lines: dict[tuple, int] | None = None):
    """`cls.model_validate(data)` with the first error as one ConfigError line (as `parse_scenario` gives)."""
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise validation_error(e, where, lines or {}) from None
