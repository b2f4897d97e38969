"""Flags through the scenario models: a command fills the same pydantic model its YAML kind uses (simulator/config)
from its flags and validates and resolves it there (`parse_scenario` + `check_references`), so a flag and the
YAML field it stands for are checked by one rule. An error on a field a flag filled is one line naming the flag
and the field path: `--batch (field 'batch[0]'): Input should be greater than 0`.
"""

from __future__ import annotations

import re

from simulator.common.errors import UserError

_FIELD = re.compile(r"field '([^']*)': ")


def _flag_for(path: str, flags: dict[str, str], given: dict[str, object]) -> str | None:
    for fld, flag in flags.items():
        if given.get(fld) is not None and (path == fld or path.startswith(fld + "[") or path.startswith(fld + ".")):
            return flag
    return None


def scenario_from_flags(kind: type, data: dict, flags: dict[str, str], given: dict[str, object],
                        where: str = "command line", check: bool = True):
    """Validate `data` as a scenario of model `kind` (and, with `check`, everything it names, as a scenario file's
    are: config/refs.py); `flags` maps a field path to the flag that fills it, `given` the flags' values as typed
    (None: not given, so the error stays the scenario's)."""
    from simulator.config.base import validate_model
    from simulator.config.refs import check_references

    try:
        sc = validate_model(kind, data, where)
        if check:
            check_references(sc, where)
        return sc
    except UserError as e:
        msg = str(e)
        m = _FIELD.search(msg)
        flag = _flag_for(m.group(1), flags, given) if m else None
        if m and flag is None and (m.group(1) == "<top>" or any(f.startswith(m.group(1) + ".") for f in flags)):
            # a rule across fields (of the scenario, or of a nested mapping such as `engine`): name the flags of
            # the fields it names
            pre = "" if m.group(1) == "<top>" else m.group(1) + "."
            sub = {f[len(pre):]: t for f, t in flags.items() if f.startswith(pre)}
            text = msg[m.end():].removeprefix("Value error, ")
            named = [f for f in sub if re.search(rf"\b{f}\b", text) and given.get(pre + f) is not None]
            if pre and not named:
                raise
            # the fields the user gave (and steps, which these rules ask for) are named by their flags; the others
            # stay field names (single words such as "engine" or "draft" also read as English)
            text = _flags_in(text, {f: sub[f] for f in sub if given.get(pre + f) is not None or f == "steps"})
            raise UserError(f"{where}: {text}" if not named else text) from None
        if flag is None:
            raise
        raise UserError(f"{flag} (field '{m.group(1)}'): {msg[m.end():]}") from None


def run_with_flags(kind: type, kind_name: str, given: dict, flags: dict, study, check: bool = True,
                   base: dict | None = None, free: dict[str, str] | None = None):
    """Fill scenario model `kind` (from `base` and the flags the user gave), run `study(scenario)`, and name the flag
    of any field the study's error names (a study speaks in fields: `field 'ctx': ...`). `check`: resolve what the
    scenario names first (config/refs.py), as a file's are; off where the study loads its inputs itself, naming
    their fields. `free`: {field: flag} for an error whose text names fields in passing (`--steps auto`)."""
    from .generated import fill

    sc = scenario_from_flags(kind, fill({"kind": kind_name, **(base or {})}, given), flags, given, check=check)
    return study_named(study, sc, flags, given, free)


def study_named(study, sc, flags: dict, given: dict, free: dict[str, str] | None = None):
    """`study(sc)`, an error that starts `field 'F'` naming the flag that filled F (`--ctx (field 'ctx'): ...`); any
    other error with the fields of `free` replaced by their flags where its text names them."""
    try:
        return study(sc)
    except UserError as e:
        msg = str(e)
        for f, flag in flags.items():
            head = f"field '{f}'"
            if msg.startswith(head) and given.get(f) is not None:
                raise UserError(f"{flag} ({head}){msg[len(head):]}") from None
        if not free:
            raise
        raise UserError(_flags_in(msg, free)) from None


def _flags_in(text: str, flags: dict[str, str]) -> str:
    """`text` with each field name of `flags` that stands as a word replaced by its flag's first name (longest
    field first: `prefill_len` before `len`)."""
    for f in sorted(flags, key=len, reverse=True):
        text = re.sub(rf"(?<![-\w.]){f}(?![-\w])", flags[f].split("/")[0], text)
    return text


def command_scenario(kind: type, kind_name: str, given: dict, texts: dict, scenario=None, base: dict | None = None,
                     flags=()):
    """The scenario a command runs: the fields of `scenario` (a file of kind `kind_name`; the flags override them)
    or the command's `base` mapping, plus the flags' values at their paths (cli/generated.py `fill`); validated and
    resolved as a scenario file is, an error on a field a flag filled naming the flag. A file without flags is
    returned as loaded (its errors keep their line numbers)."""
    from .checks import named
    from .generated import fill

    if scenario is not None:
        from simulator.config import load_scenario

        typed = any(v is not None for v in given.values())
        with named("--scenario"):
            sc = load_scenario(scenario, check=not typed)
        if not isinstance(sc, kind):
            raise UserError(f"{scenario}: kind '{sc.kind}' is not a {kind_name} scenario (--scenario needs kind "
                            f"'{kind_name}')")
        if not typed:
            return sc
        data, where = sc.model_dump(mode="python", exclude_unset=True), f"{scenario} (with command-line flags)"
        graph = given.get("graph")
        if graph is not None and str(getattr(graph, "value", graph)) == "none":
            # --graph none over a file's graph mode: the capture fields the file gave for that mode go with it (the
            # model refuses capture sizes with graph none only where they are given together)
            for f in ("layout", "prefill_layout", "attention_backend"):
                if given.get(f) is None:
                    data.pop(f, None)
    else:
        data, where = {"kind": kind_name, **(base or {})}, "command line"
    return scenario_from_flags(kind, fill(data, given, flags), texts, given, where)
