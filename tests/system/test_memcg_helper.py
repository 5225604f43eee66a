"""The dying-memcg helper makes real dying memory cgroups on this cgroup-v1 kernel, and cleans up."""

from __future__ import annotations

import os

import pytest

from tests.fleet import memcg

pytestmark = pytest.mark.kernel


@pytest.fixture
def memcg_ready() -> None:
    reason = memcg.available()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but dying memcgs cannot be made: {reason}", pytrace=False)
        pytest.skip(reason)


def test_make_dying_memcgs_raises_the_count_by_n(memcg_ready: None) -> None:
    before = memcg.settle()
    with memcg.DyingMemcgs() as batch:
        rise = batch.make(500)
        assert 490 <= rise <= 510
        live_before = memcg.live_memcg_count()
        assert memcg.dying_memcg_count() >= before + 490  # still dying: their page cache pins them
        assert memcg.live_memcg_count() == live_before
        rise2 = batch.make(200)
        assert 195 <= rise2 <= 210
    # cleanup removed the files and dropped caches: the dying memcgs are released
    assert memcg.dying_memcg_count() <= before + 10


def test_module_level_helpers(memcg_ready: None) -> None:
    before = memcg.settle()
    try:
        assert memcg.make_dying_memcgs(100) >= 95
        assert memcg.dying_memcg_count() >= before + 95
    finally:
        memcg.cleanup_dying_memcgs()
    assert memcg.dying_memcg_count() <= before + 10
    assert not list(memcg.MEMCG_ROOT.glob("ami-auditor-test-*"))


def test_refuses_to_exhaust_memcg_ids(memcg_ready: None) -> None:
    with memcg.DyingMemcgs() as batch, pytest.raises(ValueError):
        batch.make(memcg.MEMCG_ID_LIMIT)
