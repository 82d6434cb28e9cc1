"""What a cluster node runs to join: `ray start` with its device kinds as resources."""
from __future__ import annotations

import json
import os


def node_resources(slots: int | None, tags: list[str]) -> dict[str, int]:
    from workers.runtime import configure_process

    configure_process()
    from farm.platforms import SLOT_RESOURCE, local_device_kinds

    n = slots or os.cpu_count() or 1
    kinds = set(local_device_kinds()) | set(tags)
    return {SLOT_RESOURCE[k]: n for k in kinds if k in SLOT_RESOURCE}


def node_command(address: str, slots: int | None, tags: list[str]) -> list[str]:
    res = node_resources(slots, tags)
    return ["ray", "start", f"--address={address}", f"--resources={json.dumps(res)}",
            "--disable-usage-stats", "--block"]
