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


def first_error(e) -> tuple[str, str]:
    """(dotted field path, message) of a pydantic ValidationError's first error."""
    err = e.errors()[0]
    return ".".join(str(x) for x in err["loc"]), err["msg"]
