"""Key binaries: hash, size, owning package, version and download-URL evidence (FIELD-NOTES §6).

A key printed twice inside one binary's block, or a block printed twice, is tampering (TamperedOutput):
the probe prints each once and folds newlines in host values, so only a forgery could repeat them."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ...facttypes import BinariesRow, BinariesRowEvidenceRow
from ..sections import TamperedOutput, blocks, to_int

_SOURCES = ("package", "exec", "none")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SIDE_FILES = (".sha256", ".sha256sum", ".sha512", ".md5", ".asc", ".sig")


def _source(evidence: list[BinariesRowEvidenceRow]) -> str | None:
    """The download URL of the binary itself (not its checksum or signature), newest evidence last."""
    urls = [url for e in evidence if (url := e.get("url")) and not url.endswith(_SIDE_FILES)]
    return urls[-1] if urls else None


def _dpkg_owner(field: str) -> str | None:
    """The package of a `dpkg -S` owner field: `pkg`, `pkg:arch`, `pkg-a, pkg-b` (the first: the one
    whose version the probe read). A diversion line (older probes passed `local diversion …`) names none."""
    if not field or field.startswith(("diversion by ", "local diversion")):
        return None
    first = field.split(",", 1)[0].strip()
    return first.split(":", 1)[0] or None


def _fields(header: str, lines: list[str]) -> tuple[dict[str, str], list[BinariesRowEvidenceRow], list[str]]:
    """One binary's `key=value` lines: (fields, download-URL evidence, the `failed=` reasons)."""
    fields: dict[str, str] = {}
    evidence: list[BinariesRowEvidenceRow] = []
    failures: list[str] = []  # what could not be read for this binary (the probe's or image reader's `failed=`)
    for line in lines:
        key, _, value = line.partition("=")
        if key == "failed":
            failures.append(value.strip())
        elif key == "url":
            file, _, url = value.partition(" ")
            url = url.strip().rstrip("\"'<> ")
            if url and {"file": file, "url": url} not in evidence:
                evidence.append({"file": file, "url": url})
        elif key in fields:  # the probe prints each key once and no host value can start a line
            raise TamperedOutput(f"binary {header!r}: {key!r} appears twice")
        else:
            fields[key] = value.strip()
    return fields, evidence, failures


def _binary(header: str, lines: list[str]) -> BinariesRow:
    fields, evidence, failures = _fields(header, lines)
    name = header.rsplit("/", 1)[-1]
    if fields.get("found") != "1":
        return {"name": name, "requested": header, "found": False}
    stat = (fields.get("stat") or "").split()
    if stat and not (len(stat) == 6 and all(c.isdigit() for c in stat[:4])):
        failures.append(f"stat printed {fields['stat'][:60]!r}, not `SIZE MTIME DEV INODE MODE OWNER`")
        stat = []
    sha256 = fields.get("sha256") or None
    if sha256 and not _SHA256.match(sha256):
        failures.append(f"sha256sum printed {sha256[:60]!r}, not a digest")
        sha256 = None
    package: str | None = None
    version_pkg: str | None = None
    manager: str | None = None
    if owner := _dpkg_owner(fields.get("dpkg_owner", "")):
        package, manager = owner, "dpkg"
        version_pkg = fields.get("dpkg_version") or None
    elif fields.get("rpm_owner"):
        cols = fields["rpm_owner"].split("\t")
        package, manager = cols[0], "rpm"
        version_pkg = cols[1] if len(cols) > 1 else None
    source_url = _source(evidence)
    version = fields.get("version") or None
    # recordings from before version_source existed ran `--version`
    source = fields.get("version_source") or ("exec" if version else "none")
    return {
        "name": name,
        "requested": header,
        "found": True,
        "path": fields.get("path"),
        "realpath": fields.get("realpath") or None,
        "size": to_int(stat[0]) if stat else None,
        "mtime": to_int(stat[1]) if len(stat) > 1 else None,
        "mode": stat[4] if len(stat) > 4 else None,
        "owner_user": stat[5] if len(stat) > 5 else None,
        "sha256": sha256,
        "package": package,
        "package_version": version_pkg,
        "package_manager": manager,
        "version": version,
        "version_source": source if source in _SOURCES else "none",
        "version_refused": fields.get("version_refused") or None,
        "source_url": source_url,
        "source_host": urlsplit(source_url).hostname if source_url else None,
        "evidence": evidence,
        "error": "; ".join(failures)[:600] or None,
    }


def parse_binaries(text: str) -> list[BinariesRow]:
    return sorted((_binary(h, lines) for h, lines in blocks(text, unique=True)),
                  key=lambda b: b.get("name") or "")  # every row is named
