"""The `rules` agent: an offline, deterministic heuristic BASELINE, not a model. It attempts any task on the sandbox
sites from the task's instruction and the page it sees, so proposed tasks (which have no known solution) can be
attempted without a model server. It often fails; every step's reasoning, the run's agent name and the episode's
agent summary say it is a baseline.

Each step it takes the first of these that applies: answer an information task once the page shows what was asked;
fill a field the instruction gives a value for; submit what it filled; click an element the instruction names; click
a button the instruction's verb calls for; search for what the instruction names; follow the link whose words the
instruction shares most; else give up, saying why. It never does the same thing twice on the same page. Ties are
broken by a random draw seeded with the attempt's seed and the task, so an episode is the same given its seed.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sandbox.verifiers import normalize_text
from taskgen.harness.agent_errors import AgentError
from taskgen.harness.agent_reach import off_sandbox
from taskgen.harness.observe import Observation, element_name

RULES = "rules"
RULES_VERSION = "rules-agent-v1"
RULES_NAME = "rules baseline (a heuristic, not a model)"
SAID = "rules baseline (not a model): "  # every step's reasoning starts so

_QUOTED = re.compile(r"“([^”]{1,200})”")
_STRAIGHT = re.compile(r'"([^"]{1,200})"')
_CAPS = re.compile(r"(?<![\w“\"])(?:[A-ZÀ-ÖØ-Þ][\w'’.&-]*)(?:\s(?:[A-ZÀ-ÖØ-Þ][\w'’.&-]*|de|d'\w+|du|la|le))+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_MONEY = re.compile(r"[€$£]\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*\.\d{2}\s?(?:€|EUR)")
_PHONE = re.compile(r"\+?\d[\d ()./-]{6,}\d")
_WORD = re.compile(r"[^\W\d_]{3,}")
_QUESTION = re.compile(r"^(what|which|who|how|find|when|where|is|are|does|do)\b", re.IGNORECASE)

# A verb of the instruction -> the buttons that carry it out, step by step (each step: the starts of the texts of
# the buttons that do it); pressing one of the last step's buttons finishes the task.
VERBS = {"put": [("add to cart",)], "add": [("add to cart",)],
         "buy": [("add to cart",), ("cart",), ("checkout",), ("place order",)],
         "email": [("compose",), ("send",)], "reply": [("reply",), ("send",)], "delete": [("delete",)],
         "star": [("star",)], "move": [("move",)], "book": [("book",), ("confirm booking",)],
         "cancel": [("cancel booking",)], "set": [("apply", "search")], "show": [("apply",)],
         "fill": [("send", "submit", "save")]}
# A field's value from the instruction, by what its label says (each label word set -> the goal's key).
FIELDS = {"to": ("to",), "subject": ("subject",), "message": ("message", "body"), "email": ("email",),
          "date": ("arrival date", "date"), "nights": ("nights",), "guests": ("guests",),
          "quantity": ("quantity", "qty"), "name": ("guest name", "full name", "guest_name", "name"),
          "address": ("address",), "shipping": ("shipping",)}
SORTS = {"cheapest": "low to high", "most expensive": "high to low", "best rated": "rating",
         "best customer rating": "rating"}
STOP_WORDS = {"the", "and", "for", "with", "this", "that", "its", "from", "report", "page", "site", "find", "show",
              "what", "which", "who", "how", "does", "give", "their", "them", "all", "on", "of", "to", "in"}
EXPLORE_AT_MOST = 4


@dataclass
class Goal:
    """What the instruction asks, as the baseline reads it."""

    instruction: str
    info: bool
    names: list[str]
    fields: dict[str, str]
    buttons: list[tuple[str, ...]]
    words: set[str]

    def step_of(self, text: str) -> int | None:
        """Which of the verb's steps a button with this text does (None: none of them)."""
        return next((n for n, starts in enumerate(self.buttons) if any(text.startswith(s) for s in starts)), None)

    def finishes(self, text: str) -> bool:
        return bool(self.buttons) and self.step_of(text) == len(self.buttons) - 1


def _first(pattern: str, text: str, flags: int = re.IGNORECASE) -> str:
    match = re.search(pattern, text, flags)
    return match.group(1).strip() if match else ""


def _fields(text: str, quoted: list[str]) -> dict[str, str]:
    values = {"email": (_EMAIL.findall(text) or [""])[0], "date": (_DATE.findall(text) or [""])[0],
              "nights": _first(r"\bfor (\d+) nights?", text), "guests": _first(r"\b(\d+) guests?", text),
              "quantity": _first(r"\b(\d+) of\b", text), "subject": _first(r"subject “([^”]+)”", text),
              "message": _first(r"message “([^”]+)”", text) or _first(r"\bwith: (.+)$", text),
              "shipping": _first(r"\bwith ([^,.]+?) shipping", text),
              "name": _first(r"\bfor ([A-ZÀ-ÖØ-Þ][^,(]+?)(?: \(|,)", text, 0),
              "address": _first(r"\bfor [^,]+, (.+?), with\b", text),
              "to": _first(r"^(?:email|write to|message) ([A-ZÀ-ÖØ-Þ][^,]+?) with\b", text)}
    if setting := re.search(r"\bset “([^”]+)” to “([^”]+)”", text, re.IGNORECASE):
        values[normalize_text(setting.group(1))] = setting.group(2)
    if filling := re.search(r"\bfill in “([^”]+)”", text, re.IGNORECASE):
        values[normalize_text(filling.group(1))] = "Hello, this is a test message."
    return {key: value for key, value in values.items() if value}


def goal_read(task: dict) -> Goal:
    """The instruction's names (quoted first, then capitalised runs), field values, verb buttons and words."""
    text = " ".join(str(task.get("instruction") or "").split())
    quoted = _QUOTED.findall(text) or _STRAIGHT.findall(text)
    capitals = [c for c in _CAPS.findall(_QUOTED.sub(" ", text)) if all(c not in q for q in quoted)]
    verb = text.split(" ", 1)[0].lower() if text else ""
    info = task.get("task_kind") == "info" or bool(_QUESTION.match(text))
    words = {w for w in (normalize_text(w) for w in _WORD.findall(text)) if w not in STOP_WORDS}
    pages = [p for p in re.findall(r"\bon the ([^“”.,]{2,60}?) page\b", text) if p not in quoted]
    return Goal(text, info, [*quoted, *pages, *capitals], _fields(text, quoted), list(VERBS.get(verb, [])), words)


def _text_of(element: dict) -> str:
    return normalize_text(element_name(element) if element["tag"] in ("input", "textarea", "select")
                          else element["text"] or element["label"])


def _keys(element: dict) -> set[str]:
    return {normalize_text(v) for v in (element.get("label"), element.get("name"), element.get("placeholder")) if v}


@dataclass
class _Memory:
    done: set[tuple[str, str]] = field(default_factory=set)  # (page path, what was done there)
    filled: dict[str, int] = field(default_factory=dict)  # page path -> the last element filled there
    searched: set[str] = field(default_factory=set)
    explored: int = 0
    finishing: bool = False  # the last verb button was pressed, or the named page reached: done next step


class RulesAgent:
    """The `Agent` protocol, by rules (see the module's docstring)."""

    name = RULES_NAME

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed
        self.steps: list[dict] = []
        self.goal: Goal | None = None
        self.memory = _Memory()
        self.rng = random.Random(seed)

    def start(self, task: dict) -> None:
        if reason := off_sandbox(task):
            raise AgentError(reason)
        self.goal, self.memory, self.steps = goal_read(task), _Memory(), []
        self.rng = random.Random(f"{self.seed}:{task.get('task_id')}")

    def act(self, observation: Observation) -> dict:
        action, why = self._decide(observation)
        self.steps.append({"step": observation.step, "url": observation.url, "reasoning": SAID + why,
                           "action": action})
        return action

    def summary(self) -> dict:
        """The episode's agent summary: a baseline, with no model, tokens or cost."""
        return {"provider": RULES, "model": RULES_VERSION, "prompt_version": "none (rules)", "baseline": True,
                "input_tokens": 0, "output_tokens": 0, "latency_ms": 0, "cost_usd": "0"}

    def _decide(self, obs: Observation) -> tuple[dict, str]:
        goal, memory, page = self.goal, self.memory, urlsplit(obs.url).path
        if memory.finishing:
            return {"done": {}}, "the last step the instruction asks for was taken"
        for rule in (self._answer, self._fill, self._submit, self._named, self._verb, self._search, self._explore):
            if decided := rule(goal, obs, page):
                return decided
        reason = "found nothing on this page that the task names or that brings it closer"
        return {"done": {"reason": f"the rules baseline gave up: it {reason}"}}, f"it {reason}; giving up"

    def _once(self, page: str, what: str) -> bool:
        """True the first time `what` is done on this page (then remembered)."""
        if (page, what) in self.memory.done:
            return False
        self.memory.done.add((page, what))
        return True

    def _answer(self, goal: Goal, obs: Observation, page: str):
        if not goal.info:
            return None
        answer = info_answer(goal, obs)
        if answer and self._once(page, "answer"):
            self.memory.finishing = True
            return {"answer": {"text": answer}}, f"the page shows what the question asks: {answer[:120]}"
        return None

    def _fill(self, goal: Goal, obs: Observation, page: str):
        for element in obs.elements:
            if element["tag"] not in ("input", "textarea", "select") or element.get("type") in ("search",):
                continue
            value = field_value(goal, element)
            if value is None or not self._once(page, f"fill {element['index']}"):
                continue
            self.memory.filled[page] = element["index"]
            if element["tag"] == "select":
                return ({"select": {"index": element["index"], "value": value}},
                        f"the instruction gives {_text_of(element)!r} a value: choose {value!r}")
            return ({"type": {"index": element["index"], "text": value, "submit": False}},
                    f"the instruction gives {_text_of(element)!r} a value: type {value!r}")
        return None

    def _submit(self, goal: Goal, obs: Observation, page: str):
        if page not in self.memory.filled or not self._once(page, "submit"):
            return None
        after = [e for e in obs.elements if e["index"] > self.memory.filled[page]
                 and (e["tag"] == "button" or e.get("type") == "submit")]
        wanted = [e for e in after if goal.step_of(_text_of(e)) is not None]
        button = (wanted or after or [None])[0]
        if button is None:
            return None
        self._once(page, f"click {_text_of(button)}")
        self.memory.finishing = self.memory.finishing or goal.finishes(_text_of(button))
        return {"click": {"index": button["index"]}}, f"submit what was filled with {_text_of(button)!r}"

    def _named(self, goal: Goal, obs: Observation, page: str):
        for name in goal.names:
            wanted = normalize_text(name)
            if normalize_text(obs.title).startswith(wanted):
                continue  # on its page already
            clickable = [e for e in obs.elements if e["tag"] in ("a", "button") and _text_of(e)]
            found = ([e for e in clickable if _text_of(e) == wanted]
                     or [e for e in clickable if _text_of(e).startswith(wanted)]
                     or [e for e in clickable if wanted in _text_of(e)])
            for element in found:
                if self._once(page, f"click {_text_of(element)}"):
                    self.memory.finishing = (name == goal.names[0] and not goal.info and not goal.buttons
                                             and not goal.fields)
                    return {"click": {"index": element["index"]}}, f"the instruction names {name!r}: open it"
        return None

    def _verb(self, goal: Goal, obs: Observation, page: str):
        for element in obs.elements:
            text = _text_of(element)
            if element["tag"] in ("a", "button") and goal.step_of(text) is not None \
                    and self._once(page, f"click {text}"):
                self.memory.finishing = goal.finishes(text) and element["tag"] == "button"
                return {"click": {"index": element["index"]}}, f"the instruction asks for {text!r}"
        return None

    def _search(self, goal: Goal, obs: Observation, page: str):
        box = next((e for e in obs.elements if e["tag"] == "input" and (e.get("type") == "search"
                                                                         or e.get("name") == "q")), None)
        text = normalize_text(obs.text)
        for name in goal.names[:2]:
            if box is None or normalize_text(name) in text or name in self.memory.searched:
                continue
            self.memory.searched.add(name)
            return ({"type": {"index": box["index"], "text": name, "submit": True}},
                    f"{name!r} is not on this page: search for it")
        return None

    def _explore(self, goal: Goal, obs: Observation, page: str):
        if self.memory.explored >= EXPLORE_AT_MOST:
            return None
        scored = []
        for element in obs.elements:
            if element["tag"] != "a" or (page, f"click {_text_of(element)}") in self.memory.done:
                continue
            overlap = len(goal.words & {normalize_text(w) for w in _WORD.findall(_text_of(element))})
            if overlap:
                scored.append((overlap, element))
        if not scored:
            return None
        best = max(score for score, _ in scored)
        element = self.rng.choice([e for score, e in scored if score == best])
        self.memory.explored += 1
        self._once(page, f"click {_text_of(element)}")
        return {"click": {"index": element["index"]}}, f"the link {_text_of(element)!r} shares words with the task"


def field_value(goal: Goal, element: dict) -> str | None:
    """The value the instruction gives this field (None: it gives none, or the field holds it already)."""
    keys = _keys(element)
    value = next((goal.fields[k] for k in goal.fields if k in keys), None)
    if value is None:
        value = next((goal.fields[key] for key, aliases in FIELDS.items() if key in goal.fields
                      and keys & set(aliases)), None)
    if element["tag"] == "select":
        return _option(goal, element, value)
    if value is None or normalize_text(element.get("value") or "") == normalize_text(value):
        return None
    return value


def _option(goal: Goal, element: dict, value: str | None) -> str | None:
    """The option of a select the instruction picks: by the value given, an option named in it, or a sort word."""
    instruction = normalize_text(goal.instruction)
    wanted = [normalize_text(value)] if value else []
    wanted += [normalize_text(o["text"]) for o in element["options"]
               if len(o["text"]) >= 3 and normalize_text(o["text"]) in instruction]
    wanted += [word for phrase, word in SORTS.items() if phrase in instruction]
    for want in wanted:
        for option in element["options"]:
            if option["value"] and want and (want in normalize_text(option["text"]) or want == option["value"]):
                return None if option["value"] == element.get("value") else option["value"]
    return None


def _after(text: str, name: str) -> str:
    """The page's text from where `name` appears (the whole text when it does not)."""
    at = normalize_text(text).find(normalize_text(name)) if name else -1
    return text[at:] if at >= 0 else text


def info_answer(goal: Goal, obs: Observation) -> str:
    """What the page says to the question, found by the question's words; "" when the page does not show it."""
    asked, name = normalize_text(goal.instruction), (goal.names[0] if goal.names else "")
    on_page = not name or normalize_text(name) in normalize_text(obs.text)
    at_it = bool(name) and normalize_text(obs.title).startswith(normalize_text(name))
    if "offer" in asked and "choices" in asked:
        select = next((e for e in obs.elements if e["tag"] == "select" and name
                       and normalize_text(name) in _keys(e)), None)
        return ", ".join(o["text"] for o in select["options"] if o["value"]) if select else ""
    if not on_page:
        return ""
    tail = _after(obs.text, name)
    for words, pattern in ((("cost", "price", "how much"), _MONEY), (("phone",), _PHONE), (("email", "who sent"),
                                                                                              _EMAIL)):
        if any(w in asked for w in words):
            found = pattern.search(tail)
            return found.group(0).strip() if found and (at_it or name) else ""
    if "how many" in asked:
        found = re.search(r"(\d+)\s*(?:guests?|people|persons)|(?:guests?|capacity)\D{0,12}(\d+)", tail, re.I)
        return (found.group(1) or found.group(2)) if found else ""
    if name and "section" in asked:
        return obs.title.split(" — ")[0]
    if at_it:
        return " ".join(line.strip() for line in tail.splitlines()[:5] if line.strip())[:300]
    return ""
