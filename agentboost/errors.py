"""The base of every bad-input error: a configuration key, a task or episode file, a dataset row,
an import path, a checkpoint. The command line prints these as one line (exit status 2); any
other exception is a bug of ours and keeps its traceback."""


class InputError(ValueError):
    """Bad input; the message names the file (or option), the field and what was expected."""


class RunFailed(RuntimeError):
    """A run that cannot learn (non-finite loss or weights, every episode failing): the run stops
    with this named error instead of ending "completed", and writes no checkpoint of the broken
    state. The command line prints it as one line (exit status 1)."""
