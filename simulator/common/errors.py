"""The one exception family for user mistakes. The CLI turns any `UserError` into one line on
stderr and exit code 2; anything else is a bug and crashes loudly."""


class UserError(ValueError):
    """Bad input: a file, flag, field or value the user can fix."""


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM (raised by the CLI's signal handlers; a BaseException so that no `except Exception`
    swallows it). The message says what was kept, e.g. that a rerun resumes a sweep."""

    def __init__(self, message: str = "interrupted", code: int = 130):
        super().__init__(message)
        self.code = code


def read_text(path, what: str, error: type[UserError] = UserError) -> str:
    """A user's text file, or one `error` line: '<path>: no such <what> file', a folder, binary, not UTF-8..."""
    from simulator.common.jsonfile import read_text_file

    return read_text_file(path, what, error)


def first_error(e) -> tuple[str, str]:
    """(dotted field path, message) of a pydantic ValidationError's first error."""
    err = e.errors()[0]
    return ".".join(str(x) for x in err["loc"]), err["msg"]


def validate_versioned(model, raw: object, where: str, version_key: str, version: int,
                       error: type[UserError], what: str, text: str | None = None):
    """Validate a versioned JSON document (a profile, a workload file) into pydantic `model`; any problem
    is one `error` line: not an object, wrong version, or the first field error with its path."""
    from pydantic import ValidationError

    if not isinstance(raw, dict):
        raise error(f"{where}: {what} must be a JSON object")
    v = raw.get(version_key)
    if v != version or isinstance(v, bool):
        from simulator.common.jsonfile import line_of

        raise error(f"{where}:{line_of(text, (version_key,))}: field '{version_key}': {version_key} is {v!r}, this launchsim "
                    f"reads version {version}")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        from simulator.common.jsonfile import field_error

        err = e.errors()[0]
        raise field_error(where, text, tuple(err["loc"]), err["msg"], error) from None
    except RecursionError:
        raise error(f"{where}: nested too deep") from None
