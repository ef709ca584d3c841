"""`{{ text|markdown }}`: an agent's answer rendered from Markdown and sanitised (review/markdown.py)."""
from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from review.markdown import markdown_html

register = template.Library()


@register.filter
def markdown(value) -> SafeString:
    return markdown_html(value if isinstance(value, str) else "")
