"""The one evaluation core: a stream of host results (snapshots or per-host errors) in, a Report out.

`scan` (hosts as they complete), `analyze` (files, on every core), `rules check --snapshot` and `diff`
all go through it (core.Evaluation): each host is judged as it arrives and indexed by content, only a
stub and the slice the fleet rules read are kept, and `finish()` makes the report. Parallel runs are the
same core in worker processes (parallel.py) and `merge` in the parent. Memory grows with distinct
configurations, not with hosts.
"""
