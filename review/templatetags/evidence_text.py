"""Showing evidence values (actions, request bodies, changes) as JSON text. The result is a plain string, so the
template still escapes it: everything here came from a website, an agent or a model."""
from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def as_json(value) -> str:
    """A value as compact JSON text (strings as they are); never marked safe."""
    if value is None or value == "" or value == {}:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
