"""Courrier, the sandbox mail client: folders, search, reading, compose, reply, star, move and delete."""
from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sandbox.evidence import sandbox_view
from sandbox.seed import FOLDERS
from sandbox.state import SiteState
from sandbox.views.common import paginate, query_without_page, row_or_404

ME = "me@courrier.example"
NOW = "2027-03-01 09:00"  # the sandbox clock stands still, so episodes replay identically


def _ctx(state: SiteState, **extra) -> dict:
    unread = [(f, sum(1 for m in state.rows("messages") if m["folder"] == f and not m["read"])) for f in FOLDERS]
    return {"site_slug": "mail", "site_name": "Courrier", "folders": FOLDERS, "folder_links": unread, **extra}


@require_GET
@sandbox_view("mail")
def home(request: HttpRequest, state: SiteState) -> HttpResponse:
    return _folder_page(request, state, "inbox")


@require_GET
@sandbox_view("mail")
def folder(request: HttpRequest, state: SiteState, name: str) -> HttpResponse:
    if name not in FOLDERS:
        raise Http404(f"No folder named {name}")
    return _folder_page(request, state, name)


def _folder_page(request: HttpRequest, state: SiteState, name: str) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    messages = [m for m in state.rows("messages") if m["folder"] == name
                and (not q or q.casefold() in (m["subject"] + " " + m["sender_name"] + " " + m["body"]).casefold())]
    return render(request, "sandbox/mail/folder.html", _ctx(
        state, folder=name, q=q, page=paginate(messages, request, 10), keep=query_without_page(request)))


@require_GET
@sandbox_view("mail")
def message(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    msg = row_or_404(state, "messages", pk)
    if not msg["read"]:
        state.update("messages", msg, read=True)
    return render(request, "sandbox/mail/message.html", _ctx(state, msg=msg))


@require_POST
@sandbox_view("mail")
def message_action(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    """Star, move or delete; deleting from the trash removes the message for good."""
    msg = row_or_404(state, "messages", pk)
    action = request.POST.get("action", "")
    back = msg["folder"]
    if action == "star":
        state.update("messages", msg, starred=not msg["starred"])
        return redirect("sandbox:mail_message", pk=msg["id"])
    if action == "move" and request.POST.get("to") in FOLDERS:
        state.update("messages", msg, folder=request.POST["to"])
    elif action == "delete" and msg["folder"] == "trash":
        state.delete("messages", msg)
    elif action == "delete":
        state.update("messages", msg, folder="trash")
    else:
        return render(request, "sandbox/mail/message.html",
                      _ctx(state, msg=msg, error="Choose an action and a folder."), status=400)
    return redirect("sandbox:mail_folder", name=back)


def _send(state: SiteState, form: dict, reply_to: int | None = None) -> dict:
    return state.create("messages", {"folder": "sent", "subject": form["subject"], "sender": ME, "sender_name": "Me",
                                     "to": form["to"], "body": form["body"], "date": NOW, "read": True,
                                     "starred": False, "in_reply_to": reply_to})


def _compose_errors(form: dict) -> list[str]:
    errors = []
    if "@" not in form["to"] or " " in form["to"]:
        errors.append("Enter one email address in To.")
    if not form["subject"]:
        errors.append("Enter a subject.")
    return errors


@require_http_methods(["GET", "POST"])
@sandbox_view("mail")
def compose(request: HttpRequest, state: SiteState) -> HttpResponse:
    source = request.POST if request.method == "POST" else request.GET
    form = {k: source.get(k, "").strip() for k in ("to", "subject", "body")}
    errors = _compose_errors(form) if request.method == "POST" else []
    if request.method == "POST" and not errors:
        _send(state, form)
        return redirect("sandbox:mail_folder", name="sent")
    return render(request, "sandbox/mail/compose.html", _ctx(state, form=form, errors=errors, title="New message"),
                  status=400 if errors else 200)


@require_http_methods(["GET", "POST"])
@sandbox_view("mail")
def reply(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    original = row_or_404(state, "messages", pk)
    if request.method == "POST":
        form = {k: request.POST.get(k, "").strip() for k in ("to", "subject", "body")}
    else:
        subject = original["subject"] if original["subject"].startswith("Re: ") else f"Re: {original['subject']}"
        form = {"to": original["sender"] if original["sender"] != ME else original["to"], "subject": subject,
                "body": ""}
    errors = _compose_errors(form) if request.method == "POST" else []
    if request.method == "POST" and not errors:
        _send(state, form, reply_to=original["id"])
        return redirect("sandbox:mail_folder", name="sent")
    return render(request, "sandbox/mail/compose.html",
                  _ctx(state, form=form, errors=errors, title="Reply", original=original),
                  status=400 if errors else 200)


@require_GET
@sandbox_view("mail")
def contacts(request: HttpRequest, state: SiteState) -> HttpResponse:
    return render(request, "sandbox/mail/contacts.html", _ctx(state, contacts=state.rows("contacts")))


@require_GET
@sandbox_view("mail")
def contact(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    return render(request, "sandbox/mail/contact.html", _ctx(state, contact=row_or_404(state, "contacts", pk)))
