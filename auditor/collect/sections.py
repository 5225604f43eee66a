"""Split the probe's raw stdout into named sections (pure; no I/O)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_START = re.compile(r"^@@AMI-AUDITOR-SECTION (?P<name>[a-z_]+)@@$")
_END = re.compile(r"^@@AMI-AUDITOR-END (?P<name>[a-z_]+) rc=(?P<rc>\d+)@@$")
DONE_MARK = "@@AMI-AUDITOR-DONE@@"


@dataclass(frozen=True)
class Section:
    """One section of probe output: its text and the shell status it ended with (None: cut off)."""

    name: str
    body: str
    rc: int | None

    @property
    def complete(self) -> bool:
        return self.rc is not None


def split_sections(raw: str) -> tuple[dict[str, Section], bool]:
    """Return the sections by name and whether the probe ran to its end marker."""
    sections: dict[str, Section] = {}
    name: str | None = None
    lines: list[str] = []
    done = False
    for line in raw.splitlines():
        if name is None:
            m = _START.match(line)
            if m:
                name, lines = m.group("name"), []
            elif line == DONE_MARK:
                done = True
            continue
        m = _END.match(line)
        if m and m.group("name") == name:
            if lines and lines[-1] == "":  # the newline the probe puts before every end marker
                lines.pop()
            sections[name] = Section(name, "\n".join(lines), int(m.group("rc")))
            name = None
        else:
            lines.append(line)
    if name is not None:  # output cut off mid-section
        sections[name] = Section(name, "\n".join(lines), None)
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
    """Split a section body on `--- name` lines; text before the first marker is under ''."""
    parts: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        if line.startswith(marker):
            current = line[len(marker):].strip()
            parts[current] = []
        else:
            parts[current].append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


def blocks(text: str, marker: str = "@ ") -> list[tuple[str, list[str]]]:
    """Split on `@ header` lines → [(header, body lines)]; lines before the first header dropped."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith(marker):
            out.append((line[len(marker):].strip(), []))
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
