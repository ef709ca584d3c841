"""The offline proposer: a deterministic baseline that writes tasks from the site's own pages, items and controls
(no model, no key). Crude on purpose, and labelled a baseline wherever it appears; it lets the demo and the tests
run the whole propose -> review -> attempt loop offline."""
from __future__ import annotations

import json
import random

from taskgen.stages.propose.keep import normalised

LABEL = "heuristic baseline (rules, not a model)"
VERSION = "rules-propose-v1"  # the model name a rules batch records
_TITLE_SEPARATORS = (" — ", " | ", " - ")


def _page_name(title: str, site_name: str) -> str:
    """A page's own name: its title without the site's name after the separator."""
    for separator in _TITLE_SEPARATORS:
        if separator in title:
            title = title.split(separator)[0]
    return title.strip() if title.strip() and title.strip() not in site_name else ""


def _item_tasks(item: str) -> tuple[list[str], list[str]]:
    info = [f"Find “{item}” on this site and report the first details its page gives.",
            f"Which section of the site lists “{item}”? Report the section's name."]
    action = [f"Open the page of “{item}”, starting from the home page.",
              f"Look up “{item}” and save or add it where the site allows."]
    return info, action


def _section_tasks(section: str) -> tuple[list[str], list[str]]:
    return ([f"What is listed first on the “{section}” page? Report its name."],
            [f"Go to the “{section}” page from the home page and open its first entry."])


def _control_tasks(control: dict, page_name: str) -> tuple[list[str], list[str]]:
    label = str(control.get("label") or control.get("name") or "").strip()
    options = [str(o.get("text") or "").strip() for o in control.get("options") or [] if isinstance(o, dict)]
    options = [o for o in options if o]
    where = f" on the {page_name} page" if page_name else ""
    if not label:
        return [], []
    if options:
        info = [f"Which choices does “{label}”{where} offer? Report them all."]
        action = [f"Set “{label}” to “{option}”{where} and show the result." for option in options[:6]]
        return info, action
    if control.get("kind") == "button":
        return [], [f"Use “{label}”{where}."]
    return [], [f"Fill in “{label}”{where} with a sensible value and submit it."]


def candidate_tasks(sitemap: dict, site_name: str) -> tuple[list[dict], list[dict]]:
    """Every task the rules can write for the site: (information tasks, action tasks), each {instruction, page}."""
    names = {p["path"]: _page_name(str(p.get("title") or ""), site_name)
             for p in sitemap["pages"] if isinstance(p, dict) and p.get("path")}
    info, action, seen = [], [], set()
    for path, name in names.items():
        if name and len(name) > 3 and name not in seen:
            seen.add(name)  # an item's page has a number in its path (/product/34/); a section's has none
            got_info, got_action = (_item_tasks if any(c.isdigit() for c in path) else _section_tasks)(name)
            info += [{"instruction": text, "page": path} for text in got_info]
            action += [{"instruction": text, "page": path} for text in got_action]
    for control in sitemap.get("controls") or []:
        if isinstance(control, dict) and control.get("kind") not in ("qa", "carry"):
            got_info, got_action = _control_tasks(control, names.get(control.get("page"), ""))
            info += [{"instruction": text, "page": control.get("page")} for text in got_info]
            action += [{"instruction": text, "page": control.get("page")} for text in got_action]
    return info, action


def _pick(pool: list[dict], count: int, focus: list[str], avoid: set[str], rng: random.Random) -> list[dict]:
    fresh = [c for c in pool if normalised(c["instruction"]) not in avoid]
    rng.shuffle(fresh)
    fresh.sort(key=lambda c: c["page"] not in focus)  # the batch's focus pages first (a stable sort)
    return fresh[:count]


def rules_answer(*, sitemap: dict, site_name: str, n: int, n_info: int, focus: list[str], avoid: set[str],
                 seed: str) -> str:
    """The JSON answer a model would give: {"tasks": [{instruction, kind}]}, the same for the same inputs."""
    info, action = candidate_tasks(sitemap, site_name)
    rng = random.Random(seed)
    chosen = [{"instruction": c["instruction"], "kind": "info"} for c in _pick(info, n_info, focus, avoid, rng)]
    chosen += [{"instruction": c["instruction"], "kind": "action"}
               for c in _pick(action, n - len(chosen), focus, avoid, rng)]
    return json.dumps({"tasks": chosen}, ensure_ascii=False)
