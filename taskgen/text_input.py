"""Text that people type into the app, or that a restored file brings: one rule for every field.

PostgreSQL cannot store a NUL character in text or JSON (psycopg refuses the whole query), so a NUL that reached a
write or a lookup answered 500. Django's form fields refuse it (`ProhibitNullCharactersValidator`, on every
CharField: the task edit form's rule). `text_check` is that same rule, with a length cap, for values that do not come
through a Django form (a label's note, a restored backup row), and `NulInputMiddleware` applies it to every field of
every request, so no form of the app can forget it: a NUL anywhere is a 400 that names the field.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

_NO_NUL = ProhibitNullCharactersValidator()


class TextInputError(ValueError):
    """A text value that cannot be stored; `field` names it, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def text_has_nul(value: str) -> bool:
    """Whether the text holds a NUL character (Django's form rule, asked without a form)."""
    try:
        _NO_NUL(value)
    except ValidationError:
        return True
    return False


def text_check(*, field: str, value: object, max_length: int | None = None) -> str:
    """The value if it is text without NUL characters and at most `max_length` characters long; else
    TextInputError naming the field."""
    if not isinstance(value, str):
        raise TextInputError(field, f"{field} must be text, not {type(value).__name__}")
    if text_has_nul(value):
        raise TextInputError(field, f"{field} contains a NUL character, which cannot be stored")
    if max_length is not None and len(value) > max_length:
        raise TextInputError(field, f"{field} is {len(value):,} characters long: at most {max_length:,} are kept")
    return value


def _first_nul_field(data) -> str | None:
    for name, values in data.lists():
        if text_has_nul(name) or any(text_has_nul(value) for value in values):
            return name.replace("\x00", "\\x00")
    return None


class NulInputMiddleware:
    """Every request's query and form fields go through `text_has_nul` before a view sees them: a NUL is a 400
    naming the field (after the CSRF and login checks, which answer first)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs) -> HttpResponse | None:
        field = _first_nul_field(request.GET)
        if field is None and request.method == "POST":
            field = _first_nul_field(request.POST)
        if field is None:
            return None
        return field_refused(request, message=f"The field {field!r} contains a NUL character, which cannot be stored.")


def field_refused(request: HttpRequest, *, message: str) -> HttpResponse:
    """The 400 page for a form field the app cannot take, saying which and why; nothing was saved."""
    return render(request, "400.html", {"message": message}, status=400)
