"""Split the probe's raw stdout into named sections (pure; no I/O).

Only markers carrying this run's nonce (collect/framing.py) open or close a section; any other line,
marker-like or not, is body text. A section that appears twice is tampering: it is kept as an error,
never silently replaced. Lines are split on `\n` only; the other characters Python treats as line
breaks (\r, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029) are neutralized in bodies (a CRLF line end
is dropped, the rest become U+FFFD), so a parser's `splitlines()` sees exactly the probe's lines.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass

from .framing import DONE_RE, END_RE, FAILED_RE, START_RE

MARKER_PREFIX = "@@AMI-AUDITOR-"  # START_RE, END_RE and DONE_RE all begin with it (a test checks)
_OTHER_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


class TamperedOutput(ValueError):
    """Probe output whose structure a host could only produce by forging it (e.g. a repeated key)."""


class UnparsableOutput(ValueError):
    """A command answered (status 0) with text that is not its output format: a broken or replaced tool,
    never an empty answer."""


@dataclass(frozen=True)
class Section:
    """One section of probe output: its text and the shell status it ended with (None: cut off).

    `problem` is set when the section cannot be trusted (it appeared more than once); `failures` are the
    reasons the probe gave for commands that failed in it (its FAILED lines, not part of `body`)."""

    name: str
    body: str
    rc: int | None
    problem: str | None = None
    failures: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return self.rc is not None and self.problem is None


def _clean(line: str) -> str:
    if line.endswith("\r"):
        line = line[:-1]
    return _OTHER_BREAKS.sub("\ufffd", line)


def _is(m: re.Match[str] | None, nonce: str) -> bool:
    return m is not None and hmac.compare_digest(m.group("nonce"), nonce)


def split_sections(raw: str, nonce: str) -> tuple[dict[str, Section], bool]:
    """Return the sections by name and whether the probe ran to its end marker (both with `nonce`)."""
    sections: dict[str, Section] = {}
    seen: dict[str, int] = {}
    name: str | None = None
    lines: list[str] = []
    failures: list[str] = []
    done = False

    def keep(section: Section) -> None:
        seen[section.name] = seen.get(section.name, 0) + 1
        if seen[section.name] > 1:
            section = Section(section.name, "", None,
                              f"probe section {section.name!r} appeared {seen[section.name]} times: "
                              "output tampered with (not trusted)")
        sections[section.name] = section

    def close(rc: int | None) -> None:
        assert name is not None
        keep(Section(name, "\n".join(lines), rc, failures=tuple(failures)))

    clean = _clean if _OTHER_BREAKS.search(raw) else None  # most outputs have nothing to neutralize
    for line in raw.split("\n"):
        if not line.startswith(MARKER_PREFIX):  # every marker starts so: a body line (or noise between sections)
            if name is not None:
                lines.append(clean(line) if clean else line)
            continue
        if name is None:
            m = START_RE.match(line)
            if _is(m, nonce):
                assert m is not None
                name, lines, failures = m.group("name"), [], []
            elif _is(DONE_RE.match(line), nonce):
                done = True
            continue
        m = END_RE.match(line)
        if _is(m, nonce) and m is not None and m.group("name") == name:
            if lines and lines[-1] == "":  # the newline the probe puts before every end marker
                lines.pop()
            close(int(m.group("rc")))
            name = None
        elif _is(START_RE.match(line), nonce):  # a new section before this one ended: this one was cut
            close(None)
            m2 = START_RE.match(line)
            assert m2 is not None
            name, lines, failures = m2.group("name"), [], []
        elif _is(f := FAILED_RE.match(line), nonce) and f is not None:
            failures.append(_clean(f.group("reason")))
        else:
            lines.append(clean(line) if clean else line)
    if name is not None:  # output cut off mid-section
        close(None)
    return sections, done


def kv_lines(text: str, sep: str = "=") -> dict[str, str]:
    """`key=value` lines → dict (first separator splits; later duplicates win)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if sep in line:
            key, value = line.split(sep, 1)
            out[key.strip()] = value.strip()
    return out


def subsections(text: str, marker: str = "--- ") -> dict[str, str]:
    """Split a section body on `--- name` lines; text before the first marker is under ''.

    A repeated marker is tampering (the probe prints each once and no host value can start a line)."""
    parts: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        if line.startswith(marker):
            current = line[len(marker):].strip()
            if current in parts:
                raise TamperedOutput(f"sub-section {current!r} appears twice")
            parts[current] = []
        else:
            parts[current].append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


def blocks(text: str, marker: str = "@ ", unique: bool = False) -> list[tuple[str, list[str]]]:
    """Split on `@ header` lines → [(header, body lines)]; lines before the first header dropped.

    `unique`: a header seen twice is tampering (raises TamperedOutput)."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith(marker):
            header = line[len(marker):].strip()
            if unique and any(h == header for h, _ in out):
                raise TamperedOutput(f"block {header!r} appears twice")
            out.append((header, []))
        elif out:
            out[-1][1].append(line)
    return out


def to_int(value: str | None) -> int | None:
    """Parse an int, tolerating blanks and junk (→ None)."""
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None
