"""What the agent sees at a step: the page's URL, title, text and a numbered list of its interactive elements."""
from __future__ import annotations

from dataclasses import dataclass, field

TEXT_CAP = 4000

# Numbers the visible interactive elements in document order and tags each with data-tg-index, so an action
# "click 7" finds the same element the agent was shown.
ELEMENTS_JS = """
() => {
  document.querySelectorAll('[data-tg-index]').forEach(e => e.removeAttribute('data-tg-index'));
  const sel = 'a[href], button, input:not([type=hidden]), select, textarea';
  const out = [];
  for (const el of document.querySelectorAll(sel)) {
    const r = el.getBoundingClientRect();
    const st = getComputedStyle(el);
    if (st.visibility === 'hidden' || st.display === 'none' || (r.width === 0 && r.height === 0)) continue;
    const i = out.length;
    el.setAttribute('data-tg-index', String(i));
    const label = (el.labels && el.labels[0]) ? el.labels[0].innerText : (el.getAttribute('aria-label') || '');
    const text = (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') ? (el.value || el.placeholder || '')
               : (el.tagName === 'SELECT' ? '' : (el.innerText || el.getAttribute('aria-label') || ''));
    const type = (el.getAttribute('type') || '').toLowerCase();
    const roles = {A: 'link', BUTTON: 'button', SELECT: 'combobox', TEXTAREA: 'textbox'};
    const role = el.getAttribute('role') || roles[el.tagName]
      || ({checkbox: 'checkbox', radio: 'radio', submit: 'button', button: 'button', reset: 'button',
           search: 'searchbox'}[type] || 'textbox');
    const checkable = type === 'checkbox' || type === 'radio';
    const value = checkable ? (el.checked ? 'checked' : 'unchecked')
      : (['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName) ? (el.value || '') : '');
    const quoted = s => JSON.stringify(s);
    const tag = el.tagName.toLowerCase();
    const selector = el.name ? `${tag}[name=${quoted(el.name)}]` : (el.id ? '#' + CSS.escape(el.id)
      : (el.getAttribute('href') ? `a[href=${quoted(el.getAttribute('href'))}]` : `[data-tg-index="${i}"]`));
    out.push({index: i, tag, type: el.getAttribute('type') || '', name: el.name || '', role,
              value: value.slice(0, 200), selector: selector.slice(0, 160),
              text: text.trim().slice(0, 120), label: label.trim().slice(0, 80), href: el.getAttribute('href') || '',
              placeholder: (el.getAttribute('placeholder') || '').slice(0, 80),
              options: el.tagName === 'SELECT'
                ? Array.from(el.options).map(o => ({text: o.text, value: o.value})) : [],
              box: [Math.round(r.x), Math.round(r.y), Math.round(r.width), Math.round(r.height)]});
  }
  return out;
}
"""


def element_name(element: dict) -> str:
    """An element's accessible name as a person reads it: a field by its label (its text is its value), a link or
    button by its text."""
    if element["tag"] in ("input", "textarea", "select"):
        return element["label"] or element.get("placeholder") or element["name"] or element["text"]
    return element["text"] or element["label"] or element["name"]


@dataclass
class Observation:
    step: int
    url: str
    title: str
    text: str
    elements: list[dict] = field(default_factory=list)
    screenshot: bytes | None = None  # the screen the agent acts on (PNG)

    def target(self, action: dict, action_index: int) -> dict | None:
        """The element an action names by index, as recorded for the review page: its name and its box on this
        step's screenshot (viewport pixels: [x, y, width, height]); None for actions that name no element."""
        params = next(iter(action.values()), None) if isinstance(action, dict) and action else None
        index = params.get("index") if isinstance(params, dict) else None
        element = next((e for e in self.elements if e["index"] == index), None) if isinstance(index, int) else None
        if element is None:
            return None
        return {"action": action_index, "step": self.step, "index": index, "tag": element["tag"],
                "name": element_name(element),
                "box": element.get("box")}

    def shown(self) -> dict:
        """What an agent that reads the whole observation is given at this step (for the record): the page's
        address, title, its numbered elements as the rows list them, and its text."""
        return {"step": self.step, "url": self.url, "title": self.title, "elements": self.element_lines(),
                "text": self.text}

    def element_lines(self) -> list[str]:
        """The numbered list as an LLM agent would read it: `[3] button "Add to cart"`."""
        lines = []
        for e in self.elements:
            desc = e["text"] or e["label"] or e["name"]
            extra = f" name={e['name']}" if e["name"] else ""
            opts = " options=" + "|".join(o["value"] for o in e["options"]) if e["options"] else ""
            lines.append(f"[{e['index']}] {e['tag']}{extra} \"{desc}\"{opts}")
        return lines


# The elements, the page's text and its title in one call: each call to the page is a round trip to Chromium.
OBSERVE_JS = f"() => ({{elements: ({ELEMENTS_JS.strip()})(), text: document.body.innerText.slice(0, {TEXT_CAP}), " \
             "title: document.title})"


def observe(page, step: int, screenshot: bytes | None = None) -> Observation:
    seen = page.evaluate(OBSERVE_JS)
    return Observation(step=step, url=page.url, title=seen["title"], text=seen["text"], elements=seen["elements"],
                       screenshot=screenshot)
