"""The package list parser: multiarch packages keep unique row keys, everything else keeps its name."""

from __future__ import annotations

from auditor.collect.parsers.packages import parse_packages


def test_multiarch_rows_are_named_with_their_arch_and_the_rest_are_not() -> None:
    text = "manager=dpkg\n" + "".join(
        f"{name}\t{version}\t{arch}\n" for name, version, arch in [
            ("zlib1g", "1:1.2.13", "amd64"), ("libc6", "2.36-9", "i386"), ("libc6", "2.36-9", "amd64"),
            ("bash", "5.2.15", "amd64"), *((f"pkg{i:05d}", "1.0", "all") for i in range(20_000))])
    facts = parse_packages(text)
    names = [r["name"] for r in facts["items"]]
    assert facts["manager"] == "dpkg" and facts["count"] == 20_004 == len(set(names))
    assert names[:3] == ["bash", "libc6:amd64", "libc6:i386"] and names[-1] == "zlib1g"
