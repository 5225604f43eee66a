"""Alerts on what is new: `--notify sns:ARN` and `--notify webhook:URL` after a scan is recorded.

Only findings first seen in this scan (unwaived) are sent. Each target is retried a few times; a
target that still fails is reported on stderr and never changes the scan's exit code or its files.
"""
