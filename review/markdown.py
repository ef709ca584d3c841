"""Agents' answers as Markdown: rendered, then sanitised, so a long answer with tables and lists reads as the agent
wrote it and nothing in it can run.

Two locks: markdown-it renders with raw HTML turned off (an answer's `<b>` or `<script>` stays visible text), and
nh3 (the Ammonia sanitiser) then keeps only the tags and attributes Markdown produces, links to http(s) and mailto
only, with rel="nofollow noopener noreferrer". Images are dropped (the app works offline and loads nothing from the
web). This is the one place the app marks HTML built from untrusted text as safe.
"""
from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_RENDERER = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"])
ALLOWED_TAGS = {"p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
                "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a"}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}


def markdown_html(text: str) -> SafeString:
    """The Markdown text as sanitised HTML."""
    rendered = _RENDERER.render(text or "")
    cleaned = nh3.clean(rendered, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes={"http", "https",
                        "mailto"}, link_rel="nofollow noopener noreferrer", strip_comments=True)
    return mark_safe(cleaned)  # noqa: S308 - rendered without raw HTML, then sanitised by nh3 (see the docstring)
