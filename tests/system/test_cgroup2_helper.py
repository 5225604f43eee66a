"""The v2 dying-cgroup helper makes real dying cgroups on this kernel's cgroup2 hierarchy, and releases them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fleet import cgroup2

pytestmark = pytest.mark.kernel
UNIFIED = Path("/sys/fs/cgroup/unified")  # the hybrid host's cgroup2 mount (a v2 host mounts it at /sys/fs/cgroup)


@pytest.fixture
def scratch() -> Path:
    mount = UNIFIED if (UNIFIED / "cgroup.stat").exists() else Path("/sys/fs/cgroup")
    if os.geteuid() != 0 or not (mount / "cgroup.stat").exists():
        reason = "needs root and a cgroup2 hierarchy"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}", pytrace=False)
        pytest.skip(reason)
    path = mount / f"ami-auditor-test-cg2-{os.getpid()}"
    path.mkdir()
    yield path
    path.rmdir()


def test_dying_cgroups_are_counted_in_cgroup_stat_until_released(scratch: Path) -> None:
    assert cgroup2.cgroup_stat(scratch)["nr_dying_descendants"] == 0
    with cgroup2.DyingCgroups(scratch, 100) as held:
        stat = cgroup2.cgroup_stat(scratch)
        assert stat["nr_dying_descendants"] == 101  # a fresh subtree: exactly ours (+ their removed parent)
        assert stat["nr_descendants"] == 0  # none of them is live (all removed)
        assert not held.parent.exists()
    assert cgroup2.cgroup_stat(scratch)["nr_dying_descendants"] == 0  # the zombies were reaped


def test_v2_cgroup_of_this_process(scratch: Path) -> None:
    mount = scratch.parent
    assert (cgroup2.v2_cgroup_of(os.getpid(), mount) / "cgroup.procs").exists()
