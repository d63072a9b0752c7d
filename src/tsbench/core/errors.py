"""The one exception type that means "the user asked for something we can't do": exit code 2, one line."""


class UserError(ValueError):
    pass
