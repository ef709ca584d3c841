"""Which tasks an agent can attempt, as rules each agent and the agent list (taskgen/harness/agents.py) both ask:
each returns why a task is out of reach ("" when it is not), in words a form, the command line and an episode's end
reason can show."""
from __future__ import annotations

from sandbox.seed import SITES


def off_sandbox(task: dict) -> str:
    """Why the harness cannot visit this task's site: it visits only the sandbox sites on this machine."""
    site = task.get("site") or ""
    if site in SITES:
        return ""
    return (f"task {task.get('task_id')} is on the site {site or '(none)'!r}, which is not a sandbox site: the "
            f"harness visits only {', '.join(sorted(SITES))} on this machine")


def no_solution(task: dict) -> str:
    """Why the scripted agent cannot attempt this task: it replays a known solution, which only the sandbox's human
    tasks have (proposed tasks have none)."""
    if ((task.get("verifier") or {}).get("solution")) if isinstance(task.get("verifier"), dict) else None:
        return ""
    return (f"task {task.get('task_id')} has no known solution for the scripted agent (it replays the solutions of "
            "the sandbox's human tasks; proposed tasks have none): use the rules baseline or a model agent")
