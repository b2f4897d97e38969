"""The one exception family for user mistakes. The CLI turns any `UserError` into one line on
stderr and exit code 2; anything else is a bug and crashes loudly."""


class UserError(ValueError):
    """Bad input: a file, flag, field or value the user can fix."""
