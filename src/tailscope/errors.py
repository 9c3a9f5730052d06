"""The one exception tree the command line maps to exit codes.

- `InputError`: the user's input (an option, a file, a campaign directory) cannot be used. The message is one
  line that names the file (and line) or the option and says what was expected. The CLI prints it and exits 2.
- `OSError` raised by a command (disk full, read-only campaign, permission denied, a name too long) is mapped
  by the CLI to exit 2 with the path and the reason (see `describe_os_error`).
Every module's own error class for bad input derives from `InputError`, so the CLI catches one class.

Exit codes (for scripts and health checkers; `check`, `analyze`, `verdict --nhc`): 0 healthy, 1 degraded (a
node failed a limit or is slower than its peers; `run`: trials failed), 2 usage or input error,
3 inconclusive (a node too busy or too noisy to judge), 130 interrupted (finished trials are stored;
`--resume` continues).
"""

from __future__ import annotations

import errno
import os


class TailscopeError(Exception):
    """Base of every error tailscope raises on purpose."""


class InputError(TailscopeError):
    """Bad input or usage: one clear line, exit code 2."""


class UsageError(InputError):
    """A command line that cannot be carried out (exit 2)."""


EXIT_OK, EXIT_VERDICT, EXIT_USAGE, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# The analysis' campaign state (the worst node verdict, analysis/health.py) -> exit code.
STATE_EXIT = {"healthy": EXIT_OK, "degraded": EXIT_VERDICT, "inconclusive": EXIT_INCONCLUSIVE}


def describe_os_error(exc: OSError) -> str:
    """One line for an OS error: the path(s) and the reason, with advice for the common ones."""
    reason = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))
    where = ""
    if exc.filename is not None:
        where = f"{os.fsdecode(exc.filename)}: "
        if exc.filename2 is not None:
            where = f"{os.fsdecode(exc.filename)} -> {os.fsdecode(exc.filename2)}: "
    advice = {
        errno.ENOSPC: " (the file system is full: free space and re-run; nothing half-written was kept)",
        errno.EDQUOT: " (disk quota exceeded: free space and re-run; nothing half-written was kept)",
        errno.EROFS: " (read-only file system: choose another campaign or output directory)",
        errno.EACCES: " (permission denied: check the owner and mode of the directory)",
        errno.EPERM: " (operation not permitted: check the owner of the directory)",
        errno.ENAMETOOLONG: " (a name is too long for the file system: use a shorter node or campaign name)",
    }.get(exc.errno or 0, "")
    if not where and not reason:
        return str(exc)
    return f"{where}{reason}{advice}"
