"""The terminal summary groups identical findings across hosts: one line with the count and the names,
worst first, then the incident chain's cause before its effects (chain position), then how many hosts."""

from __future__ import annotations

import io

from auditor.context import Env
from auditor.models import Finding, HostResult, HostSpec, Report
from auditor.render.stage import print_summary, summarize

HOSTS = ["a1", "a2", "a3", "b1", "b2", "b3"]
RULES = [{"id": "systemd.unit-crash-looping", "severity": "high", "chain_position": 0},
         {"id": "cgroups.dying-memcgs-high", "severity": "high", "chain_position": 1},
         {"id": "fleet.shared-machine-id", "severity": "high"},
         {"id": "fleet.shared-ssh-host-key", "severity": "high"},
         {"id": "os.apt-cache", "severity": "low"}]


def cloned_report() -> Report:
    names = ", ".join(HOSTS)
    findings = [Finding(h, "fleet.shared-machine-id", "high", f"6 hosts share machine-id abc: {names}", item="abc")
                for h in HOSTS]
    findings += [Finding(h, "fleet.shared-ssh-host-key", "high", f"6 hosts share SSH host key SHA256:{k}: {names}",
                         item=f"SHA256:{k}") for h in HOSTS for k in ("rsa", "ecdsa", "ed25519")]
    findings += [Finding(h, "os.apt-cache", "low", "/var/cache/apt holds 23 MB") for h in HOSTS]
    findings += [Finding(h, "cgroups.dying-memcgs-high", "high", f"{n} dying memcgs")
                 for h, n in (("b1", 2100), ("b2", 2050), ("b3", 1990))]
    findings += [Finding(h, "systemd.unit-crash-looping", "high", f"ecs.service restarted {n} times",
                         item="ecs.service") for h, n in (("b1", 31), ("b2", 30), ("b3", 29))]
    hosts = [HostResult(HostSpec(h, f"ssh://{h}"), "ok", None, None, 1.0) for h in HOSTS]
    return Report(hosts=hosts, generated_at="2026-01-01T00:00:00Z", fail_on="high", findings=findings,
                  rules=RULES, exit_code=1)


def lines(report: Report) -> list[str]:
    out = io.StringIO()
    print_summary(summarize(report), report.exit_code, Env(stdout=out, stderr=io.StringIO()))
    return out.getvalue().strip("\n").splitlines()


def test_identical_findings_are_one_line_with_count_and_names() -> None:
    text = lines(cloned_report())
    machine = [ln for ln in text if "machine-id" in ln]
    assert machine == ["  [HIGH    ] 6 hosts (a1, a2, a3, b1, b2, b3): 6 hosts share machine-id abc: "
                       "a1, a2, a3, b1, b2, b3"]
    assert len([ln for ln in text if "SSH host key" in ln]) == 3  # one per key, not per host and key
    assert len([ln for ln in text if "apt" in ln]) == 1


def test_among_equals_the_cause_comes_first_then_its_effects() -> None:
    text = lines(cloned_report())
    findings = [ln for ln in text if ln.startswith("  [")]
    assert findings[0] == "  [HIGH    ] 3 hosts (b1, b2, b3): ecs.service restarted 31 times (b1; others differ)"
    assert "dying memcgs" in findings[1]
    assert "apt" in findings[-1]  # low after every high
    assert len(findings) == 1 + 1 + 1 + 3 + 1


def test_one_host_keeps_its_name_first() -> None:
    report = cloned_report()
    report.findings = [f for f in report.findings if f.rule == "os.apt-cache"][:1]
    assert "  [LOW     ] a1: /var/cache/apt holds 23 MB" in lines(report)


def test_many_hosts_are_counted_not_all_named() -> None:
    report = cloned_report()
    many = [f"x{i:02}" for i in range(40)]
    report.findings = [Finding(h, "os.apt-cache", "low", "/var/cache/apt holds 23 MB") for h in many]
    (line,) = [ln for ln in lines(report) if "apt" in ln]
    assert line.startswith("  [LOW     ] 40 hosts (x00, x01, x02, x03, x04, … 35 more): /var/cache/apt")


def test_not_evaluated_rules_fold_below_the_findings_one_line_per_area() -> None:
    """As the judge makes them (judge/plain.py not_evaluated): an area not read, or a rule that raised."""
    report = cloned_report()
    why = "systemd not collected (systemd is not running)"
    report.findings += [Finding(h, rule, "info", f"{rule} could not be evaluated: {why}",
                                evidence={"status": "unknown", "missing": ["systemd"]})
                        for rule in ("systemd.unit-crash-looping", "systemd.unit-failed") for h in ("a1", "a2")]
    raised = "kernel.thp-mode could not be evaluated: TypeError: x"
    report.findings.append(Finding("a1", "kernel.thp-mode", "info", raised, evidence={"status": "error"}))
    text = lines(report)
    assert not [ln for ln in text if ln.startswith("  [") and "could not be evaluated" in ln]
    folded = [ln for ln in text if "could not be evaluated" in ln]
    assert folded == [f"  could not be evaluated on 2 hosts (a1, a2): 2 rules reading systemd: {why}",
                      "  could not be evaluated on a1: 1 rule that raised an error: TypeError: x"], folded
    assert text.index(folded[0]) > max(i for i, ln in enumerate(text) if ln.startswith("  ["))
