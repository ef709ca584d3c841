"""One episode in a real browser: open the start page, let the agent act step by step, collect the evidence.

The harness only visits loopback addresses (the sandbox sites' server); a step that goes elsewhere is refused.
"""
from __future__ import annotations

import time
from contextlib import contextmanager, suppress
from urllib.parse import urljoin, urlsplit

from django.conf import settings

from sandbox.evidence import COOKIE
from sandbox.models import SandboxSession
from sandbox.verifiers import VerifierError, verifier_evaluate
from taskgen.harness.agent_errors import AgentError, AgentStop
from taskgen.harness.agents import Agent
from taskgen.harness.browser import HarnessError, browser_context, in_browser_thread
from taskgen.harness.observe import TEXT_CAP, Observation, observe
from taskgen.harness.rundir import EpisodeRecord
from taskgen.harness.server import server_seconds

VIEWPORT = {"width": 1280, "height": 800}
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
STEP_TIMEOUT_MS = 10_000
SCREEN_TRIES = 3  # Chromium's refusals of a capture pass in a moment; three in a row is a browser in trouble
SCREEN_RETRY_MS = 250
CAPTURE_REFUSED = "Unable to capture screenshot"  # Chromium's answer to Page.captureScreenshot when it refuses


class _Clock:
    """Seconds spent per phase of an episode (browser, agent, app), for the benchmark."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - start


def resolve_url(base_url: str, target: str) -> str:
    url = urljoin(base_url + "/", target)
    if urlsplit(url).hostname not in LOOPBACK:
        raise HarnessError(f"refused to visit {url}: the harness only visits the sandbox on this machine")
    return url


def screen_capture(page) -> bytes:
    """The page's viewport as PNG. Chromium now and then refuses a capture outright, most often the first one after
    the browser starts, and takes the same picture when asked again a moment later: that refusal, and only that, is
    asked again (up to SCREEN_TRIES times), so a browser's hiccup is not recorded as the agent's failed episode."""
    from playwright.sync_api import Error as BrowserError

    refused = None
    for attempt in range(SCREEN_TRIES):
        if attempt:
            page.wait_for_timeout(SCREEN_RETRY_MS)
        try:
            return page.screenshot(type="png")
        except BrowserError as exc:
            if CAPTURE_REFUSED not in str(exc):
                raise
            refused = exc
    raise HarnessError(f"Chromium refused to capture the page {SCREEN_TRIES} times in a row, {SCREEN_RETRY_MS} ms "
                       f"apart ({CAPTURE_REFUSED})") from refused


def episode_run(*, task: dict, agent: Agent, base_url: str, max_steps: int = 20, label: str = "") -> EpisodeRecord:
    """Run one task to the end; any failure (browser died, page error, timeout) is kept in `record.error`."""
    record = EpisodeRecord(task=task, agent=agent.name)
    clock = _Clock()
    served_before = server_seconds()
    session = SandboxSession.objects.create(label=label or task["task_id"])
    try:
        with clock.phase("agent"):
            agent.start(task)
    except AgentError as exc:  # the agent cannot attempt this task: an outcome with its reason, not an error
        record.finished, record.end_reason = "cannot_attempt", str(exc)[:2000]
    else:
        _attempt(record, agent, session.token, base_url, max_steps, clock)
    with clock.phase("app"):
        _collect_evidence(record, session)
    record.timings = {**clock.spent, "sandbox_server": server_seconds() - served_before}
    _agent_report(record, agent)
    return record


def _attempt(record: EpisodeRecord, agent: Agent, token: str, base_url: str, max_steps: int, clock: _Clock) -> None:
    try:
        in_browser_thread(_drive, record, agent, token, base_url, max_steps, clock)
    except Exception as exc:  # one episode's failure is recorded, never the end of the run
        record.error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:500]
        record.finished, record.end_reason = "error", record.error  # at record.end_step, the step it was on
        record.error_final = bool(getattr(exc, "final", False))


class SiteServerErrors:
    """The site's 5xx answers during an episode. A 5xx means the site may have dropped a write the agent made (a
    database that was busy, a crash), so the episode's evidence cannot be trusted: the episode fails, loudly, with
    the requests named, instead of being judged on a request log that is missing its writes."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self.seen: list[str] = []

    def __call__(self, response) -> None:  # Playwright's page "response" event
        if response.status >= 500 and response.url.startswith(self.base_url):
            self.seen.append(f"{response.request.method} {urlsplit(response.url).path} -> {response.status}")

    def raise_if_any(self) -> None:
        if self.seen:
            raise HarnessError(f"the site failed to answer {'; '.join(self.seen[:5])}: a write may be lost, so the "
                               "episode is not kept as recorded (see the worker's log for the site's error)")


def _drive(record: EpisodeRecord, agent: Agent, token: str, base_url: str, max_steps: int, clock: _Clock) -> None:
    with clock.phase("browser"):
        context = browser_context(VIEWPORT)
        context.clear_cookies()
        context.add_cookies([{"name": COOKIE, "value": token, "url": base_url + "/"}])
        page = context.new_page()
        server_errors = SiteServerErrors(base_url)
        page.on("response", server_errors)
    try:
        with clock.phase("browser"):
            page.set_default_timeout(STEP_TIMEOUT_MS)
            page.goto(resolve_url(base_url, record.task.get("start_path") or "/"), wait_until="load")
        server_errors.raise_if_any()
        _loop(record, agent, page, base_url, max_steps, clock, server_errors)
        with clock.phase("browser"):
            record.final_shot = screen_capture(page)
            record.seen.append(page.inner_text("body")[:TEXT_CAP])
    finally:
        with clock.phase("browser"), suppress(Exception):  # a dead browser's page is gone already; keep its error
            page.close()


def _agent_report(record: EpisodeRecord, agent: Agent) -> None:
    """A model agent's per-step record (prompt, raw output, reasoning, tokens, latency) and its episode summary."""
    if hasattr(agent, "summary"):
        record.agent_steps = [{k: v for k, v in s.items() if k not in ("action_text", "outcome")}
                              for s in agent.steps]
        record.agent_run = agent.summary()
        record.timings["model"] = record.agent_run["latency_ms"] / 1000  # inside "agent": the model's own time


def _loop(record: EpisodeRecord, agent: Agent, page, base_url: str, max_steps: int, clock: _Clock,
          server_errors: SiteServerErrors) -> None:
    started = time.monotonic()
    try:
        for step in range(1, max_steps + 1):
            record.end_step = step
            _time_check(clock, started, step)
            if _step(record, agent, page, base_url, step, clock, server_errors):
                return
        record.finished = "step_limit"
        record.end_reason = f"the step limit ({max_steps}) was reached"
    finally:
        deciding = clock.spent.get("agent", 0.0)
        record.time = {"episode_seconds": round(time.monotonic() - started - deciding, 1),
                       "episode_limit": settings.HARNESS_EPISODE_SECONDS, "agent_seconds": round(deciding, 1),
                       "agent_limit": settings.AGENT_MODEL_SECONDS}


def _step(record: EpisodeRecord, agent: Agent, page, base_url: str, step: int, clock: _Clock,
          server_errors: SiteServerErrors) -> bool:
    """One step: observe, let the agent act, carry the action out; True when the episode ends here."""
    with clock.phase("browser"):  # the sub-phases (screenshot, observe, act) are for the benchmark
        with clock.phase("screenshot"):
            shot = screen_capture(page)
        with clock.phase("observe"):
            obs = observe(page, step, shot)
    record.observations.append(agent.shown(obs) if hasattr(agent, "shown") else obs.shown())
    stop = None
    try:
        with clock.phase("agent"):
            action = agent.act(obs)
    except AgentStop as stopped:  # the agent said what cannot be done here: the episode ends, cleanly
        stop, action = stopped, _not_carried_out(stopped)
        record.finished, record.end_reason = stop.finished, stop.reason
    record.shots.append(shot)
    record.seen.append(obs.text)
    if target := obs.target(action, len(record.actions)):
        record.targets.append(target)
    record.actions.append(action)
    name, params = next(iter(action.items()))
    if name != "invalid":  # what the model said that was not carried out is the judge's evidence, never a row
        record.rows.append(_row(record, obs, action, len(record.rows) + 1))
        record.row_screens.append(step)
    if stop is not None:
        return True
    if name == "done":
        reason = str((params or {}).get("reason") or "")
        if not record.finished:  # a done with a reason is the agent giving up, and saying why
            record.finished, record.end_reason = ("gave_up", reason) if reason else ("done", "")
        return True
    if name != "invalid":  # an answer the model could not phrase twice: a failed step, nothing to execute
        with clock.phase("browser"), clock.phase("act"):
            _execute(record, page, base_url, name, params or {})
        server_errors.raise_if_any()
    return False


def _not_carried_out(stop: AgentStop) -> dict:
    """The step's record when the agent stopped the episode: what it said, marked as not carried out."""
    if stop.action and "invalid" in stop.action:
        return stop.action
    said = {"action": stop.action} if stop.action else {}
    return {"invalid": {"error": stop.reason, **said}}


def _time_check(clock: _Clock, started: float, step: int) -> None:
    """Stop an episode over its time: the browser's (HARNESS_EPISODE_SECONDS) and, apart, the agent's own time
    deciding (AGENT_MODEL_SECONDS): twenty steps of a 6 s model used to fill the browser's limit by themselves."""
    deciding = clock.spent.get("agent", 0.0)
    browsing = time.monotonic() - started - deciding
    if browsing > settings.HARNESS_EPISODE_SECONDS:
        raise HarnessError(f"episode timed out after {settings.HARNESS_EPISODE_SECONDS}s of browser time at step "
                           f"{step} (TASKGEN_HARNESS_EPISODE_SECONDS; the agent's own time is not counted in it)")
    if deciding > settings.AGENT_MODEL_SECONDS:
        raise HarnessError(f"episode stopped at step {step}: the agent took {deciding:.0f}s to decide, over "
                           f"TASKGEN_AGENT_MODEL_SECONDS ({settings.AGENT_MODEL_SECONDS}s)")


def _row(record: EpisodeRecord, obs: Observation, action: dict, number: int) -> dict:
    """Training row `number` (counted over performed actions, from 1): what the agent saw and what it did."""
    return {"task_id": record.task_id, "step": number, "instruction": record.task.get("instruction"),
            "url": obs.url, "title": obs.title, "elements": obs.element_lines(), "text": obs.text, "action": action,
            "image": f"step_{number}.png"}


def _element(page, params: dict):
    return page.locator(f'[data-tg-index="{int(params["index"])}"]')


# Whether acting on an element loads a new page (a link, a submit button), so the harness waits for that page.
NAVIGATES_JS = """el => (el.tagName === 'A' && !!el.getAttribute('href') && !el.getAttribute('href').startsWith('#'))
  || ((el.tagName === 'BUTTON' || el.tagName === 'INPUT') && !!el.form
      && ['submit', ''].includes((el.getAttribute('type') || '').toLowerCase()) && el.tagName === 'BUTTON')
  || (el.tagName === 'INPUT' && (el.getAttribute('type') || '').toLowerCase() === 'submit' && !!el.form)"""


def _maybe_navigating(page, element, act, navigates: bool) -> None:
    if navigates:
        with page.expect_navigation(wait_until="load"):
            act()
    else:
        act()


def _execute(record: EpisodeRecord, page, base_url: str, name: str, params: dict) -> None:
    if name == "answer":
        record.answer = str(params.get("text") or "")
    elif name == "goto":
        page.goto(resolve_url(base_url, str(params.get("url") or params.get("path") or "/")), wait_until="load")
    elif name == "click":
        element = _element(page, params)
        _maybe_navigating(page, element, element.click, element.evaluate(NAVIGATES_JS))
    elif name == "type":
        element = _element(page, params)
        element.fill(str(params.get("text") or ""))
        if params.get("submit"):  # Enter submits the element's form, if it has one
            _maybe_navigating(page, element, lambda: element.press("Enter"), element.evaluate("el => !!el.form"))
    elif name == "select":
        _element(page, params).select_option(value=str(params.get("value") or ""))
    elif name == "scroll":
        page.mouse.wheel(0, int(params.get("dy") or 600))
    elif name == "back":
        page.go_back(wait_until="load")
    else:
        raise HarnessError(f"unknown action {name!r}")
    page.wait_for_load_state("load")


def _collect_evidence(record: EpisodeRecord, session: SandboxSession) -> None:
    """The session's request log and data changes, and the verifier run against its final state."""
    session.refresh_from_db()
    record.log, record.changes = session.log, session.changes
    verifier = record.task.get("verifier")
    if not record.error and verifier:
        try:
            outcome = verifier_evaluate(verifier=verifier, state=session.state, answer=record.answer, log=session.log)
            record.verifier = outcome.as_dict()
        except VerifierError as exc:
            record.verifier = {"ok": False, "parts": [], "error": str(exc)}
    session.delete()  # its evidence is in the record now; a finished episode's site copy is not worth keeping
