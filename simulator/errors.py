"""The one exception family for user mistakes. The CLI turns any `UserError` into one line on
stderr and exit code 2; anything else is a bug and crashes loudly."""


class UserError(ValueError):
    """Bad input: a file, flag, field or value the user can fix."""


def read_text(path, what: str, error: type[UserError] = UserError) -> str:
    """A user's text file, or one `error` line: '<path>: no such <what> file' / 'cannot read ...'."""
    from pathlib import Path

    p = Path(path)
    try:
        return p.read_text()
    except FileNotFoundError:
        raise error(f"{p}: no such {what} file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise error(f"{p}: cannot read {what} file ({e.__class__.__name__})") from None


def first_error(e) -> tuple[str, str]:
    """(dotted field path, message) of a pydantic ValidationError's first error."""
    err = e.errors()[0]
    return ".".join(str(x) for x in err["loc"]), err["msg"]


def validate_versioned(model, raw: object, where: str, version_key: str, version: int,
                       error: type[UserError], what: str):
    """Validate a versioned JSON document (a profile, a workload file) into pydantic `model`; any problem
    is one `error` line: not an object, wrong version, or the first field error with its path."""
    from pydantic import ValidationError

    if not isinstance(raw, dict):
        raise error(f"{where}: {what} must be a JSON object")
    v = raw.get(version_key)
    if v != version:
        raise error(f"{where}: {version_key} is {v!r}, this launchsim reads version {version}")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        loc, msg = first_error(e)
        raise error(f"{where}: field '{loc}': {msg}") from None
