"""Whether processes are gone, as a loaded machine sees it.

A killed process stays in the process table as a zombie until its parent (or PID 1, for an
orphan) reaps it, and `os.kill(pid, 0)` succeeds on a zombie. So "dead" here means: no such
process, or a zombie; and checks wait with a generous deadline instead of expecting the
kernel and PID 1 to be instant.
"""

from __future__ import annotations

import time
from pathlib import Path

DEADLINE_SECONDS = 30.0


def _state(stat: str) -> str:
    # /proc/<pid>/stat: "pid (comm) S ppid pgrp ..."; comm may contain spaces and parentheses.
    return stat.rsplit(")", 1)[1].split()[0]


def is_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return True
    return _state(stat) != "Z"


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def wait_until_dead(pid: int, deadline: float = DEADLINE_SECONDS) -> bool:
    """True once `pid` is gone or a zombie; False if it is still running at the deadline."""
    end = time.monotonic() + deadline
    while is_alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def wait_until_group_gone(pgid: int, deadline: float = DEADLINE_SECONDS) -> bool:
    end = time.monotonic() + deadline
    while group_members(pgid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True
