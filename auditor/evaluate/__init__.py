"""The one evaluation core: a stream of host results (snapshots or per-host errors) in, a Report out.

Every run (auditor/run/driver.py: `scan`, `analyze`, `rules check --snapshot`) goes through core.Evaluation:
each host is judged as it arrives and indexed by content, only a stub and the slice the fleet rules read
are kept, and `finish()` makes the report. Parallel runs are the same core in worker processes
(files.py over forked.py) merged in the parent. Memory grows with distinct configurations, not with hosts.
"""
