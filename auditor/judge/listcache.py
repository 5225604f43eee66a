"""A cache of validated `rules list` listings, so a repeat run prints without loading YAML, JMESPath or jinja2.

Keyed by the sha256 of everything the listing depends on: each pack file's path and bytes (built-in and
--rules), the --set texts, the --rules-config file's path and bytes, the tool and Python versions, the
installed YAML, JMESPath and jinja2 (file, size, mtime), and the bytes of the fact schema and of the code that
validates packs. Only a pack set that validated is ever written, so a malformed pack never has an entry: it
is validated (and refused, exit 2 naming file and line) on every run.

Entries live in `$XDG_CACHE_HOME/ami-auditor/` (else `~/.cache/ami-auditor/`), one JSON file per key, written
atomically (a temporary file, then rename). A cache file is untrusted input: it is read with O_NOFOLLOW, only if
it is a regular file of ours that nobody else can write, at most MAX_ENTRY_BYTES, as JSON (never pickle), and
schema-checked; anything else is a miss. A missing, unwritable or read-only cache directory only skips caching.
Stdlib only.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..errors import InputError
from ..inputfile import MAX_YAML_BYTES
from .rulefiles import rule_files

if TYPE_CHECKING:
    from ..options import RuleOptions

ENTRY_SCHEMA = "ami-auditor/rules-list-cache/2"  # 2: rows carry refs
MAX_ENTRY_BYTES = 4 * 1024 * 1024
KEEP = 32  # entries kept (newest first); older ones are removed when one is written
PREFIX = "rules-list-"
ROW_KEYS = ("id", "severity", "pack", "title", "tags", "reads", "source", "refs")  # commands/rules.py's row, in order
_STR_KEYS = ("id", "severity", "pack", "title", "source")
_LIST_KEYS = ("tags", "reads", "refs")
_PKG = Path(__file__).resolve().parent.parent
# What validating and listing packs depends on besides the packs: a changed checkout invalidates the cache
# even when the version number did not change.
CODE = ("__init__.py", "models.py", "errors.py", "yamlload.py", "inputfile.py", "inputschema.py", "schemacheck.py",
        "schemas/rule-pack.schema.json", "collect/schema.py", "collect/facts.yaml", "commands/rules.py",
        *(f"judge/{p.name}" for p in sorted((_PKG / "judge").glob("*.py"))))
LIBRARIES = ("yaml", "jmespath", "jinja2", "jsonschema_rs")  # jsonschema_rs: the rule-pack schema's verdict


@dataclass(frozen=True)
class Listing:
    """What `rules list` prints: one row per rule (commands/rules.py) and the number of packs."""

    rows: list[dict[str, Any]]
    packs: int


def cache_dir() -> Path | None:
    """`$XDG_CACHE_HOME/ami-auditor`, else `~/.cache/ami-auditor` (None without a home directory)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):
            return None
    return Path(base) / "ami-auditor"


def _digest(path: Path | str, limit: int) -> str | None:
    """sha256 of a regular file's bytes (None if unreadable, not a regular file, or over `limit` bytes)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        h, total = hashlib.sha256(), 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > limit:
                return None
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def _libraries() -> list[Any]:
    """Which YAML, JMESPath, jinja2 and jsonschema-rs validated: each one's file, size and mtime (an upgrade
    rewrites them), found without importing them."""
    out: list[Any] = []
    for name in LIBRARIES:
        try:
            spec = importlib.util.find_spec(name)
            origin = spec.origin if spec is not None else None
            st = os.stat(origin) if origin else None
        except (ImportError, ValueError, OSError):
            origin, st = None, None
        out.append([name, origin, st.st_size if st else None, st.st_mtime_ns if st else None])
    return out


def listing_key(opts: RuleOptions) -> str | None:
    """The cache key of a `rules list` run, or None when it cannot be cached (a file missing or unreadable:
    full validation then reports it, with its usual message)."""
    try:
        files = rule_files(opts.rule_paths, opts.builtin)
    except InputError:
        return None
    config = opts.config
    parts: list[Any] = [ENTRY_SCHEMA, __version__, sys.version, list(opts.settings), opts.builtin, _libraries()]
    for name in CODE:
        parts.append([name, _digest(_PKG / name, MAX_ENTRY_BYTES)])
    for f in files:
        digest = _digest(f, MAX_YAML_BYTES)
        if digest is None:
            return None
        parts.append([str(f), digest])
    if config is not None:
        digest = _digest(config, MAX_YAML_BYTES)
        if digest is None:
            return None
        parts.append(["--rules-config", config, digest])
    return hashlib.sha256(json.dumps(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _entry_path(key: str) -> Path | None:
    folder = cache_dir()
    return folder / f"{PREFIX}{key}.json" if folder is not None else None


def _read_bounded(path: Path) -> bytes | None:
    """The bytes of a regular file of ours that no other user can write, at most MAX_ENTRY_BYTES; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022
                or st.st_size > MAX_ENTRY_BYTES):
            return None
        data = b""
        while len(data) <= MAX_ENTRY_BYTES and (chunk := os.read(fd, MAX_ENTRY_BYTES + 1 - len(data))):
            data += chunk
        return data if len(data) <= MAX_ENTRY_BYTES else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _checked(doc: Any, key: str) -> Listing | None:
    """The listing in a parsed entry if it has exactly the expected shape and key, else None."""
    if not isinstance(doc, dict) or set(doc) != {"schema", "key", "packs", "rows"}:
        return None
    packs, rows = doc["packs"], doc["rows"]
    if (doc["schema"] != ENTRY_SCHEMA or doc["key"] != key or type(packs) is not int or not 0 <= packs <= 1_000_000
            or not isinstance(rows, list)):
        return None
    out: list[dict[str, Any]] = []
    for row in rows:
        if not isinstance(row, dict) or set(row) != set(ROW_KEYS):
            return None
        if not all(isinstance(row[k], str) for k in _STR_KEYS):
            return None
        if not all(isinstance(row[k], list) and all(isinstance(v, str) for v in row[k]) for k in _LIST_KEYS):
            return None
        out.append({k: row[k] for k in ROW_KEYS})  # the order commands/rules.py prints (--json)
    return Listing(out, packs)


def read_listing(key: str) -> Listing | None:
    """The cached listing for `key`, or None (no entry, or one that is not exactly what write_listing writes)."""
    path = _entry_path(key)
    data = _read_bounded(path) if path is not None else None
    if data is None:
        return None
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return _checked(doc, key)


def write_listing(key: str, listing: Listing) -> None:
    """Store `listing` under `key` atomically; any OSError (read-only or missing directory, disk full) skips it."""
    from ..atomicio import write_text_atomic  # only on a miss

    path = _entry_path(key)
    if path is None:
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps({"schema": ENTRY_SCHEMA, "key": key, "packs": listing.packs,
                                            "rows": listing.rows}), mode=0o600)
        _prune(path.parent)
    except OSError:
        pass


def _prune(folder: Path) -> None:
    """Keep the KEEP newest entries (every edit of a pack makes a new key)."""
    entries = []
    for entry in os.scandir(folder):
        if entry.name.startswith(PREFIX) and entry.name.endswith(".json"):
            with contextlib.suppress(OSError):
                entries.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.path))
    for _, old in sorted(entries, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(old)
