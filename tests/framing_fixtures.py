"""The fixed framing nonce of recorded probe output, and the converter from the old (nonce-less) markers.

Recorded fixtures (tests/data/probe/*/raw.txt) carry FIXTURE_NONCE so they stay readable and diffable;
`python3 -m tests.framing_fixtures FILE...` rewrites old-style markers in place.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from auditor.collect import framing

FIXTURE_NONCE = "0123456789abcdef0123456789abcdef"

_OLD_START = re.compile(r"^@@AMI-AUDITOR-SECTION ([a-z_]+)@@$", re.M)
_OLD_END = re.compile(r"^@@AMI-AUDITOR-END ([a-z_]+) rc=(\d+)@@$", re.M)
_OLD_DONE = re.compile(r"^@@AMI-AUDITOR-DONE@@$", re.M)


def reframe(raw: str, nonce: str = FIXTURE_NONCE) -> str:
    """Old-style markers → markers carrying `nonce` (bodies untouched)."""
    raw = _OLD_START.sub(lambda m: framing.start_marker(nonce, m.group(1)), raw)
    raw = _OLD_END.sub(lambda m: framing.end_marker(nonce, m.group(1), int(m.group(2))), raw)
    return _OLD_DONE.sub(framing.done_marker(nonce), raw)


def renonce(raw: str, old: str, new: str) -> str:
    """Output framed with nonce `old` as if framed with `new` (only marker lines change)."""
    out = []
    for line in raw.split("\n"):
        if any(r.match(line) and r.match(line).group("nonce") == old  # type: ignore[union-attr]
               for r in (framing.START_RE, framing.END_RE, framing.DONE_RE)):
            line = line.replace(old, new, 1)
        out.append(line)
    return "\n".join(out)


def frame(sections: dict[str, str], nonce: str = FIXTURE_NONCE, done: bool = True) -> str:
    """Probe output made of complete sections (name → body), as the probe prints it."""
    text = "".join(framing.section_text(nonce, name, body) for name, body in sections.items())
    return text + (framing.done_marker(nonce) + "\n" if done else "")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        path = Path(name)
        path.write_text(reframe(path.read_text()))
