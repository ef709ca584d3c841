"""Séjour, the sandbox booking site: search rooms by city and guests, a month calendar per room, booking forms."""
from __future__ import annotations

import calendar
from datetime import date, timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sandbox.evidence import sandbox_view
from sandbox.seed import CITIES, MONTHS
from sandbox.state import SiteState
from sandbox.views.common import int_field, paginate, query_without_page, row_or_404


def _ctx(**extra) -> dict:
    return {"site_slug": "booking", "site_name": "Séjour Rooms", "cities": CITIES, **extra}


def _taken_days(state: SiteState, room_id: int) -> set[str]:
    """Every night a confirmed booking holds for the room, as YYYY-MM-DD."""
    days = set()
    for b in state.filter("bookings", room_id=room_id, status="confirmed"):
        start = date.fromisoformat(b["date"])
        days.update((start + timedelta(days=i)).isoformat() for i in range(b["nights"]))
    return days


@require_GET
@sandbox_view("booking")
def home(request: HttpRequest, state: SiteState) -> HttpResponse:
    return render(request, "sandbox/booking/home.html", _ctx())


@require_GET
@sandbox_view("booking")
def rooms(request: HttpRequest, state: SiteState) -> HttpResponse:
    city = request.GET.get("city", "")
    guests = int_field(request.GET.get("guests"), 1, 1, 10)
    found = [r for r in state.rows("rooms") if (not city or r["city"] == city) and r["capacity"] >= guests]
    return render(request, "sandbox/booking/rooms.html", _ctx(
        page=paginate(found, request, 6), city=city, guests=guests, total=len(found),
        keep=query_without_page(request)))


@require_GET
@sandbox_view("booking")
def room(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    return render(request, "sandbox/booking/room.html", _ctx(room=row_or_404(state, "rooms", pk), months=MONTHS))


@require_GET
@sandbox_view("booking")
def room_calendar(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    room_row = row_or_404(state, "rooms", pk)
    month = request.GET.get("month") if request.GET.get("month") in MONTHS else MONTHS[0]
    year, mon = (int(x) for x in month.split("-"))
    taken = _taken_days(state, room_row["id"])
    weeks = [[None if d == 0 else {"day": d, "iso": f"{month}-{d:02d}", "free": f"{month}-{d:02d}" not in taken}
              for d in week] for week in calendar.Calendar().monthdayscalendar(year, mon)]
    i = MONTHS.index(month)
    return render(request, "sandbox/booking/calendar.html", _ctx(
        room=room_row, month=month, month_name=f"{calendar.month_name[mon]} {year}", weeks=weeks,
        prev_month=MONTHS[i - 1] if i else "", next_month=MONTHS[i + 1] if i + 1 < len(MONTHS) else ""))


def _booking_errors(state: SiteState, room_row: dict, form: dict) -> list[str]:
    errors = [] if form["guest_name"] else ["Enter the guest's name."]
    if "@" not in form["email"]:
        errors.append("Enter an email address.")
    try:
        start = date.fromisoformat(form["date"])
    except ValueError:
        return errors + ["Choose a date on the calendar."]
    if form["guests"] > room_row["capacity"]:
        errors.append(f"This room sleeps at most {room_row['capacity']}.")
    nights = {(start + timedelta(days=i)).isoformat() for i in range(form["nights"])}
    if nights & _taken_days(state, room_row["id"]):
        errors.append("Some of those nights are already booked.")
    return errors


@require_http_methods(["GET", "POST"])
@sandbox_view("booking")
def book(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    room_row = row_or_404(state, "rooms", pk)
    source = request.POST if request.method == "POST" else request.GET
    form = {k: source.get(k, "").strip() for k in ("date", "guest_name", "email", "notes")}
    form["guests"] = int_field(source.get("guests"), 1, 1, 10)
    form["nights"] = int_field(source.get("nights"), 1, 1, 14)
    errors = _booking_errors(state, room_row, form) if request.method == "POST" else []
    if request.method == "POST" and not errors:
        booking = state.create("bookings", {"room_id": room_row["id"], "room_name": room_row["name"], **form,
                                            "status": "confirmed"})
        return redirect("sandbox:booking_detail", pk=booking["id"])
    return render(request, "sandbox/booking/book.html", _ctx(room=room_row, form=form, errors=errors),
                  status=400 if errors else 200)


@require_GET
@sandbox_view("booking")
def bookings(request: HttpRequest, state: SiteState) -> HttpResponse:
    rows = sorted(state.rows("bookings"), key=lambda b: b["date"])
    return render(request, "sandbox/booking/bookings.html", _ctx(page=paginate(rows, request, 10)))


@require_GET
@sandbox_view("booking")
def booking_detail(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    return render(request, "sandbox/booking/booking.html", _ctx(booking=row_or_404(state, "bookings", pk)))


@require_POST
@sandbox_view("booking")
def booking_cancel(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    row = row_or_404(state, "bookings", pk)
    state.update("bookings", row, status="cancelled")
    return redirect("sandbox:booking_detail", pk=row["id"])
