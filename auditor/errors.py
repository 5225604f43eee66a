"""Error types shared by every room. InputError maps to exit code 2."""

from __future__ import annotations


class AuditorError(Exception):
    """Base class for errors the CLI reports without a traceback."""


class InputError(AuditorError):
    """A bad input file or bad usage: names the file and line (and column, when known: `file:line:col:` as
    compilers print it, which editors and CI annotations jump to); the CLI exits 2."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 column: int | None = None):
        self.message = message
        self.path = path
        self.line = line
        self.column = column if line else None
        where = ""
        if path:
            where = f"{path}: "
            if line:
                where = f"{path}:{line}:{column}: " if column else f"{path}:{line}: "
        super().__init__(f"{where}{message}")


class OutputError(AuditorError):
    """Results could not be saved (disk full, read-only, permission refused): the CLI exits 3, not 4.

    The environment failed, not the program; the previous files are left as they were."""


class TransportError(AuditorError):
    """A host could not be reached or did not answer; `status` becomes the host's status."""

    status = "error"


class Unreachable(TransportError):
    status = "unreachable"


class AuthFailed(TransportError):
    status = "auth_failed"


class HostKeyRejected(AuthFailed):
    """The host's key is unknown or does not match known_hosts (possible man in the middle)."""

    status = "host_key_rejected"


class ProbeTimeout(TransportError):
    status = "timeout"
