"""Template tags for the episode workbench.

`request_rows` renders the request log in Python: a long log (hundreds of lines) costs a Django template loop most of
the page's time. Every value goes through format_html, which escapes it; nothing is marked safe unescaped.
"""
from __future__ import annotations

from django import template
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from review.page_text import text_clip
from review.workbench import Request

register = template.Library()

_ROW = ('<tr id="req-{}" class="{}"><td class="num">{}</td><td><strong>{}</strong></td><td class="clip"><code>{}</code>'
        '</td><td class="clip"><code>{}</code></td><td class="clip"><code>{}</code></td><td>{}</td></tr>\n')


def _classes(r: Request) -> str:
    return " ".join(name for name, on in (("write", r.is_write), ("noise", r.is_noise), ("cited", r.cited)) if on)


@register.simple_tag
def request_rows(requests: list[Request]) -> SafeString:
    return format_html_join("", _ROW, ((r.index, _classes(r), r.index, r.method, r.path, r.params, r.body, r.status)
                                       for r in requests))


@register.filter
def clip(value) -> str:
    """Long untrusted text cut for the page, saying how much was left out (review/page_text.py); still escaped."""
    return text_clip(value if isinstance(value, str) else str(value or ""))
