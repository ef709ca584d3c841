"""The human tasks over the sandbox sites, built from the seed data so every fact and item named is real.

Each task is a tasks.jsonl line in the reference format (kind "human"), its verifier filled in, and the known
solution kept inside the verifier as browser actions whose targets name an element by text, name or link.
`sandbox/tasks.jsonl` is this catalogue written out (`python manage.py taskgen sandbox-tasks`).
"""
from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

from sandbox.seed import CONTACTS, SHOP_CATEGORIES, seed_site

TASKS_FILE = Path(__file__).resolve().parent / "tasks.jsonl"
SHIPPING_LABELS = {"standard": "standard", "express": "express (next day)", "pickup": "store pick-up"}


def _task(site: str, n: int, macro: str, kind: str, instruction: str, checks: list, solution: list) -> dict:
    return {"kind": "human", "task_id": f"sb-{site}-{n:03d}", "site": site, "sites": [site], "macro": macro,
            "macros": [macro], "instruction": instruction, "start_path": f"/sites/{site}/", "task_kind": kind,
            "verifier": {"checks": checks, "solution": solution}}


def _say(text: str) -> list[dict]:
    return [{"answer": {"text": text}}, {"done": {}}]


def _click(text: str = "", **target) -> dict:
    return {"click": {"target": {"text": text, **target} if text else target}}


def _type(name: str, text: str, submit: bool = False) -> dict:
    return {"type": {"target": {"name": name}, "text": text, "submit": submit}}


def _select(name: str, value: str) -> dict:
    return {"select": {"target": {"name": name}, "value": value}}


def _answer(*values: str, part: str = "the answer states it") -> dict:
    return {"part": part, "type": "answer_contains", "values": list(values)}


def _row(site: str, collection: str, where: dict, part: str) -> dict:
    return {"part": part, "type": "row_exists", "site": site, "collection": collection, "where": where}


# ── shop ──────────────────────────────────────────────────────────────────────

def _find_product(p: dict) -> list[dict]:
    return [_type("q", p["name"], submit=True), _click(p["name"])]


def _shop_tasks() -> list[dict]:
    products = seed_site("shop")["products"]
    out = []
    for p in products[2::8][:6]:
        out.append(("price", "info", f"What does “{p['name']}” cost at Maison Épicerie? Report the price.",
                    [_answer(p["price"], part="the answer states the price")],
                    _find_product(p) + _say(f"€{p['price']}")))
    for cat in list(SHOP_CATEGORIES)[:3]:
        best = max((p for p in products if p["category"] == cat), key=lambda p: p["rating"])
        out.append(("top_rated", "info", f"Which {cat} product has the best customer rating? Report its name.",
                    [_answer(best["name"], part="the answer names the best-rated product")],
                    [_click(cat.title()), _select("sort", "rating"), _click("Apply")] + _say(best["name"])))
    for cat in list(SHOP_CATEGORIES)[3:]:
        low = min((p for p in products if p["category"] == cat), key=lambda p: float(p["price"]))
        out.append(("cheapest", "info", f"Find the cheapest product in the {cat} category; report its name and price.",
                    [_answer(low["name"], part="names the cheapest product"),
                     _answer(low["price"], part="states its price")],
                    [_click(cat.title()), _select("sort", "price_asc"), _click("Apply")]
                    + _say(f"{low['name']}, €{low['price']}")))
    for i, p in enumerate(products[5::11][:4]):
        qty = 2 + i % 3
        out.append(("add_to_cart", "action", f"Put {qty} of “{p['name']}” in my cart.",
                    [_row("shop", "cart_items", {"product_id": p["id"], "qty": qty},
                          f"{qty} × {p['name']} in the cart")],
                    _find_product(p) + [_type("qty", str(qty)), _click("Add to cart"), {"done": {}}]))
    out += [_buy_task(p, i) for i, p in enumerate(products[7::12][:4])]
    for cat, sort, label in (("tea", "price_asc", "cheapest first"), ("books", "rating", "best rated first")):
        out.append(("browse", "action", f"Show me the {cat} products, {label}.",
                    [{"part": f"{cat} listed {label}", "type": "request_made", "method": "GET",
                      "path": "/sites/shop/search/", "query": {"category": cat, "sort": sort}}],
                    [_click(cat.title()), _select("sort", sort), _click("Apply"), {"done": {}}]))
    return [_task("shop", n + 1, *t) for n, t in enumerate(out)]


def _buy_task(p: dict, i: int) -> tuple:
    name, email, _, _ = CONTACTS[i * 3]
    address = f"{12 + i} Rue de l'Église, {['Lyon', 'Zürich', 'Kraków', 'Montréal'][i]}"
    shipping = ["express", "standard", "pickup", "express"][i]
    checks = [_row("shop", "orders", {"items": {"has": {"product_id": p["id"]}}}, f"an order with {p['name']}"),
              _row("shop", "orders", {"items": {"has": {"product_id": p["id"]}}, "shipping": shipping},
                   f"{SHIPPING_LABELS[shipping]} shipping"),
              _row("shop", "orders", {"items": {"has": {"product_id": p["id"]}}, "name": name, "address": address},
                   "delivered to the right name and address")]
    solution = _find_product(p) + [_click("Add to cart"), _click("Proceed to checkout"), _type("name", name),
                                   _type("address", address), _select("shipping", shipping), _click("Place order"),
                                   {"done": {}}]
    return ("checkout", "action", f"Buy one “{p['name']}” for {name}, {address}, with {SHIPPING_LABELS[shipping]} "
            "shipping.", checks, solution)


# ── mail ──────────────────────────────────────────────────────────────────────

def _open_message(m: dict) -> list[dict]:
    return [_type("q", m["subject"], submit=True), _click(m["subject"])]


def _mail_tasks() -> list[dict]:
    data = seed_site("mail")
    contacts, msgs = data["contacts"], sorted(data["messages"], key=lambda m: m["id"])
    inbox = [m for m in msgs if m["folder"] == "inbox" and 2 <= m["id"] <= 24 and not m["starred"]]
    out = []
    for c in contacts[1::3]:
        out.append(("contact_phone", "info", f"What is {c['name']}'s phone number?",
                    [_answer(c["phone"], part="the answer gives the phone number")],
                    [_click("Contacts"), _click(c["name"])] + _say(c["phone"])))
    for m in inbox[0:4]:
        out.append(("sender", "info", f"Who sent me the email “{m['subject']}”? Give their email address.",
                    [_answer(m["sender"], part="the answer gives the sender's address")],
                    _open_message(m) + _say(m["sender"])))
    for i, c in enumerate(contacts[0::3]):
        subject, body = f"Catalogue {2027 + i} — “Été” edition", f"Hi {c['name'].split()[0]}, the proofs are ready."
        out.append(("send", "action", f"Email {c['name']} with the subject “{subject}” and the message “{body}”",
                    [_row("mail", "messages", {"folder": "sent", "to": c["email"], "subject": subject},
                          f"a message to {c['email']} with that subject"),
                     _row("mail", "messages", {"folder": "sent", "to": c["email"], "body": {"contains": body}},
                          "the message text")],
                    [_click("Contacts"), _click(c["name"]), _click(f"Write an email to {c['name']}"),
                     _type("subject", subject), _type("body", body), _click("Send"), {"done": {}}]))
    for m in inbox[4:7]:
        text = "Thanks, noted — I'll get back to you on Monday."
        out.append(("reply", "action", f"Reply to {m['sender_name']}'s email “{m['subject']}” with: {text}",
                    [_row("mail", "messages", {"folder": "sent", "to": m["sender"], "in_reply_to": m["id"],
                                               "body": {"contains": text}}, "a reply with that text")],
                    _open_message(m) + [_click("Reply"), _type("body", text), _click("Send"), {"done": {}}]))
    for m in inbox[7:10]:
        out.append(("delete", "action", f"Delete the email “{m['subject']}”.",
                    [_row("mail", "messages", {"id": m["id"], "folder": "trash"}, "the email is in the trash")],
                    _open_message(m) + [_click("Delete"), {"done": {}}]))
    for m in inbox[10:12]:
        out.append(("archive", "action", f"Move the email “{m['subject']}” to the archive.",
                    [_row("mail", "messages", {"id": m["id"], "folder": "archive"}, "the email is archived")],
                    _open_message(m) + [_select("to", "archive"), _click("Move"), {"done": {}}]))
    for m in inbox[12:14]:
        out.append(("star", "action", f"Star the email “{m['subject']}” from {m['sender_name']}.",
                    [_row("mail", "messages", {"id": m["id"], "starred": True}, "the email is starred")],
                    _open_message(m) + [_click("Star"), {"done": {}}]))
    return [_task("mail", n + 1, *t) for n, t in enumerate(out)]


# ── booking ───────────────────────────────────────────────────────────────────

def _open_room(r: dict) -> list[dict]:
    return [_select("city", r["city"]), _click("Search rooms"), _click(r["name"])]


def _free_start(rooms_bookings: list[dict], room_id: int, nights: int, month: str) -> str:
    taken = set()
    for b in rooms_bookings:
        if b["room_id"] == room_id and b["status"] == "confirmed":
            start = date.fromisoformat(b["date"])
            taken.update((start + timedelta(days=i)).isoformat() for i in range(b["nights"]))
    for day in range(9, 28):
        start = date.fromisoformat(f"{month}-{day:02d}")
        if not {(start + timedelta(days=i)).isoformat() for i in range(nights)} & taken:
            return start.isoformat()
    raise ValueError(f"room {room_id} has no free stretch in {month}")


def _booking_tasks() -> list[dict]:
    data = seed_site("booking")
    rooms, bookings = data["rooms"], data["bookings"]
    out = []
    for r in rooms[1::4]:
        out.append(("room_price", "info", f"How much does “{r['name']}” cost per night?",
                    [_answer(str(r["price"]), part="the answer states the nightly price")],
                    _open_room(r) + _say(f"€{r['price']} per night")))
    for r in rooms[3::10][:2]:
        out.append(("room_capacity", "info", f"How many guests can stay in “{r['name']}”?",
                    [_answer(str(r["capacity"]), part="the answer states how many it sleeps")],
                    _open_room(r) + _say(f"It sleeps {r['capacity']}.")))
    for i, r in enumerate(rooms[2::3][:7]):
        out.append(_book_task(r, i, bookings))
    ordered = sorted(bookings, key=lambda b: b["date"])
    for b in (ordered[1], ordered[6], ordered[12]):
        pager = [_click("Next »")] if ordered.index(b) >= 10 else []
        out.append(("cancel", "action", f"Cancel booking #{b['id']} ({b['guest_name']}, {b['room_name']}).",
                    [_row("booking", "bookings", {"id": b["id"], "status": "cancelled"}, "the booking is cancelled")],
                    [_click("My bookings")] + pager + [_click(f"Booking #{b['id']}"), _click("Cancel booking"),
                                                       {"done": {}}]))
    return [_task("booking", n + 1, *t) for n, t in enumerate(out)]


def _book_task(r: dict, i: int, bookings: list[dict]) -> tuple:
    guest, email, _, _ = CONTACTS[(i * 5 + 2) % len(CONTACTS)]
    nights, month = 1 + i % 3, ["2027-03", "2027-04", "2027-05"][i % 3]
    start = _free_start(bookings, r["id"], nights, month)
    key = {"room_id": r["id"], "date": start, "status": "confirmed"}
    checks = [_row("booking", "bookings", key, f"{r['name']} booked from {start}"),
              _row("booking", "bookings", {**key, "nights": nights}, f"for {nights} night(s)"),
              _row("booking", "bookings", {**key, "guest_name": guest, "email": email}, f"in the name of {guest}")]
    solution = _open_room(r) + [_click(f"Calendar for {month}"), _click(href_contains=f"date={start}"),
                                _type("nights", str(nights)), _type("guest_name", guest), _type("email", email),
                                _click("Confirm booking"), {"done": {}}]
    return ("book", "action", f"Book “{r['name']}” for {guest} ({email}), arriving {start}, for {nights} "
            f"night{'s' if nights > 1 else ''}.", checks, solution)


def sandbox_tasks() -> list[dict]:
    """Every human task of the sandbox sites, in a stable order."""
    return _shop_tasks() + _mail_tasks() + _booking_tasks()


def sandbox_tasks_write(*, path: Path = TASKS_FILE) -> int:
    tasks = sandbox_tasks()
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    return len(tasks)
