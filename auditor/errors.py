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


class InputErrors(InputError):
    """Several independent bad inputs (each broken rule of a pack, say), named together so one run shows them
    all; the CLI prints one line each. Built from two or more InputErrors, in file and line order."""

    def __init__(self, errors: list[InputError]):
        self.errors = sorted(errors, key=lambda e: (e.path or "", e.line or 0, e.column or 0))
        first = self.errors[0]
        super().__init__(first.message, first.path, first.line, first.column)
        self.args = ("\n".join(str(e) for e in self.errors),)


def raise_all(errors: list[InputError]) -> None:
    """Raise nothing, the one error, or all of them as InputErrors."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InputErrors(errors)


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
