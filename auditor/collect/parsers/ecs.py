"""ECS agent evidence: is a cluster configured, how often the agent exited (FIELD-NOTES §3)."""

from __future__ import annotations

from ...facttypes import Ecs
from ..sections import kv_lines, to_int


def parse_ecs(text: str) -> Ecs:
    kv = kv_lines(text)
    cluster = None
    if "cluster_line" in kv:
        cluster = kv["cluster_line"].split("=", 1)[-1].strip().strip("\"'") or None
    exits = 0
    log_present = False
    last_exit = None
    for line in text.splitlines():
        if line.startswith("log="):
            log_present = True
            exits += to_int(line.rsplit(" ", 1)[-1]) or 0
        elif line.startswith("last_exit="):
            last_exit = line.split("=", 1)[1]
    container: dict[str, str] = {}
    for token in text.split():
        if token.startswith(("agent_started=", "agent_status=", "agent_restarts=")):
            key, value = token.split("=", 1)
            container[key] = value
    return {
        "config_present": kv.get("config_present") == "1",
        "cluster": cluster,
        "cluster_configured": cluster is not None,
        "init_log_present": log_present,
        "agent_exits": exits,
        "last_exit": last_exit,
        "agent_container_started": container.get("agent_started"),
        "agent_container_status": container.get("agent_status"),
        "agent_container_restarts": to_int(container.get("agent_restarts")),
    }
