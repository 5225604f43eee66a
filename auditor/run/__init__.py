"""Runs: where hosts come from (live hosts, snapshot files, the two sides of `diff`) and the one driver that
takes them through the evaluation core to a report, the store and an exit code (driver.py)."""
