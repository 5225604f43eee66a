"""Scan history for scheduled drift scans: saved reports, per-host trends, growth between scans."""
