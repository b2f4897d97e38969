"""Choice flags: a typer option (or argument) typed by one of the enums of simulator/common/vocab.py.

`--help` lists the values (`--graph [none|full|...]`) and a bad value stops the command before it runs with one
line naming the flag and the scenario field it fills, e.g. `--graph (field 'graph'): unknown graph mode
'sometimes': use one of none, full, ...` (exit code 2, through `simulator.cli.main`). The value the command
receives is the enum member, which is equal to its string everywhere (see vocab.py).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Iterable

from simulator.common.errors import UserError

# typer is imported by the two functions that build its options: the typer-free dispatch of cli/fast.py loads
# this module (BadChoice, choice_error) without it


class BadChoice(Exception):
    """A value outside a choice flag's set. Not a ValueError, so that the option parser (typer, click, pydantic in
    some typer versions) does not re-wrap it as its own multi-line usage error; `main` prints it as a UserError."""

    def __init__(self, message: str):
        super().__init__(message)
        self.error = UserError(message)


def choice_error(flag: str, value: object, allowed: Iterable[str], what: str, field: str | None = None) -> str:
    at = f"{flag} (field '{field}')" if field else flag
    return f"{at}: unknown {what} {value!r}: use one of {', '.join(allowed)}"


def parser(enum: type[Enum], flag: str, what: str, field: str | None = None, choices: Iterable[Enum] | None = None):
    """The function that turns a flag's text into a member of `enum` (restricted to `choices`) or raises BadChoice."""
    allowed = tuple(enum) if choices is None else tuple(choices)
    by_value = {str(m.value): m for m in allowed}

    def parse(v: Any):
        if v is None:
            return None
        m = by_value.get(str(v.value) if isinstance(v, Enum) else v) if isinstance(v, (str, Enum)) else None
        if m is None:
            raise BadChoice(choice_error(flag, v.value if isinstance(v, Enum) else v, by_value, what, field))
        return m

    parse.__name__ = f"parse_{enum.__name__}"
    return parse, "[" + "|".join(by_value) + "]"


def option(enum: type[Enum], default, *flags: str, help: str, what: str, field: str | None = None,
           choices: Iterable[Enum] | None = None):
    """`typer.Option` for a choice flag: `flags[0]` names it in errors; `field` is the scenario field it fills."""
    import typer

    parse, metavar = parser(enum, flags[0], what, field, choices)
    if default is not None:
        help = f"{help}  [default: {getattr(default, 'value', default)}]"
    return typer.Option(default, *flags, help=help, metavar=metavar, parser=parse, show_default=False)


def argument(enum: type[Enum], default, name: str, *, help: str, what: str):
    import typer

    parse, metavar = parser(enum, name, what)
    return typer.Argument(default, help=help, metavar=name.upper(), parser=parse)
