"""The probe's argument grammar: what a binary name or path may look like and the opt-in flags.

Neutral ground (imports nothing of ours): collect validates and builds requests with it, and the SSM
document spells the same grammar as `allowedPattern` and the same flags in its shell text, without
the transport importing collect."""

from __future__ import annotations

# One path segment: shell-inert characters, never `.` or `..` (`...` or `.hidden` are ordinary names).
SEGMENT = r"(?:[A-Za-z0-9_+-][A-Za-z0-9._+-]*|\.[A-Za-z0-9_+-][A-Za-z0-9._+-]*|\.\.[A-Za-z0-9._+-]+)"
NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]*"
CLEAN_PATH = rf"(?:/{SEGMENT})+"  # absolute, no `//`, no trailing `/`, no `.`/`..` segments
EXEC_VERSIONS_FLAG = "--exec-versions"
DEEP_CPU_FLAG = "--deep-cpu"  # `--deep cpu`: perf kernel stacks of the hottest core (probe's cpu_stack section)
PROBE_FLAGS = (EXEC_VERSIONS_FLAG, DEEP_CPU_FLAG)
NONCE_PATTERN = r"^[0-9a-f]{32}$"  # the framing nonce (collect/framing.py NONCE_HEX_LEN = 32)
