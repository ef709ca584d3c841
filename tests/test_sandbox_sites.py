"""The sandbox sites: session-bound access, evidence per session, CSRF, escaping, and each site's verifier."""
from __future__ import annotations

import pytest
from django.test import Client

from sandbox.evidence import COOKIE
from sandbox.models import SandboxSession
from sandbox.verifiers import verifier_evaluate
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _browser(csrf: bool = False) -> tuple[Client, SandboxSession]:
    session = SandboxSession.objects.create(label="test")
    client = Client(enforce_csrf_checks=csrf)
    client.cookies[COOKIE] = session.token
    return client, session


def _task(task_id: str) -> dict:
    from sandbox.catalog import sandbox_tasks

    return next(t for t in sandbox_tasks() if t["task_id"] == task_id)


def _verify(task: dict, session: SandboxSession, answer: str = "") -> bool:
    session.refresh_from_db()
    return verifier_evaluate(verifier=task["verifier"], state=session.state, answer=answer, log=session.log).ok


def test_a_site_without_a_sandbox_session_refuses_and_records_nothing():
    response = Client().get("/sites/shop/")
    assert response.status_code == 403
    assert b"needs a sandbox session" in response.content
    assert Client(headers={"cookie": f"{COOKIE}=forged"}).get("/sites/mail/").status_code == 403


def test_a_site_needs_no_app_login_but_the_sandbox_index_does(client):
    browser, _ = _browser()
    assert browser.get("/sites/booking/").status_code == 200
    assert client.get("/sites/").status_code == 302  # the app's own page about the sandbox needs a login


def test_a_reviewer_can_open_a_session_from_the_sandbox_page(reviewer_client, viewer_client):
    assert viewer_client.post("/sites/enter/").status_code == 403
    response = reviewer_client.post("/sites/enter/")
    assert response.status_code == 302
    assert SandboxSession.objects.filter(token=response.cookies[COOKIE].value).exists()
    assert reviewer_client.get("/sites/shop/").status_code == 200
    assert reviewer_client.get("/sites/enter/").status_code == 405


def test_requests_are_logged_with_query_and_body_without_the_csrf_token():
    browser, session = _browser(csrf=True)
    browser.get("/sites/shop/search/", {"q": "tea", "sort": "price_asc"})
    browser.get("/sites/shop/product/9/")  # its form sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    browser.post("/sites/shop/cart/add/", {"product_id": 9, "qty": 2, "csrfmiddlewaretoken": token})
    session.refresh_from_db()
    assert session.log[0] == {"method": "GET", "path": "/sites/shop/search/",
                              "query": {"q": "tea", "sort": "price_asc"}, "body": {}, "status": 200}
    assert session.log[2] == {"method": "POST", "path": "/sites/shop/cart/add/", "query": {},
                              "body": {"product_id": "9", "qty": "2"}, "status": 302}


def test_a_post_without_a_csrf_token_is_refused_and_changes_nothing():
    browser, session = _browser(csrf=True)
    assert browser.post("/sites/shop/cart/add/", {"product_id": 9, "qty": 2}).status_code == 403
    session.refresh_from_db()
    assert session.changes == []


def test_changes_are_recorded_as_change_entries():
    browser, session = _browser()
    browser.post("/sites/mail/message/3/action/", {"action": "move", "to": "archive"})
    session.refresh_from_db()
    change = session.changes[-1]
    assert change["collection"] == "messages" and change["op"] == "update" and change["site"] == "mail"
    assert change["changed"] == {"folder": ["inbox", "archive"]}
    assert change["before"]["folder"] == "inbox" and change["after"]["folder"] == "archive"


def test_interleaved_sessions_each_see_only_their_own_requests_and_changes():
    a, session_a = _browser()
    b, session_b = _browser()
    a.post("/sites/shop/cart/add/", {"product_id": 1, "qty": 1})
    b.get("/sites/shop/search/", {"q": "pan"})
    a.get("/sites/shop/cart/")
    b.get("/sites/shop/cart/")
    session_a.refresh_from_db()
    session_b.refresh_from_db()
    assert [e["path"] for e in session_a.log] == ["/sites/shop/cart/add/", "/sites/shop/cart/"]
    assert [e["path"] for e in session_b.log] == ["/sites/shop/search/", "/sites/shop/cart/"]
    assert len(session_a.changes) == 1 and session_b.changes == []
    assert session_b.state["shop"]["cart_items"] == []
    assert "Your cart is empty" in b.get("/sites/shop/cart/").content.decode()


def test_names_with_quotes_and_accents_are_escaped():
    browser, _ = _browser()
    html = browser.get("/sites/shop/product/1/").content.decode()
    assert "Café &quot;Noir&quot; Espresso Beans" in html
    assert 'Café "Noir"' not in html


def test_a_missing_item_is_a_logged_404():
    browser, session = _browser()
    assert browser.get("/sites/booking/rooms/999/").status_code == 404
    session.refresh_from_db()
    assert session.log[-1]["status"] == 404


def test_shop_checkout_passes_its_verifier_and_the_wrong_shipping_fails():
    task = _task("sb-shop-017")  # buy one item, express shipping, to a name and address
    checks = {c["part"]: c for c in task["verifier"]["checks"]}
    order = next(iter(checks.values()))["where"]["items"]["has"]["product_id"]
    person = next(c["where"] for c in checks.values() if "address" in c["where"])
    for shipping, expected in (("express", True), ("standard", False)):
        browser, session = _browser()
        browser.post("/sites/shop/cart/add/", {"product_id": order, "qty": 1})
        browser.post("/sites/shop/checkout/", {"name": person["name"], "address": person["address"],
                                               "shipping": shipping})
        assert _verify(task, session) is expected


def test_mail_send_passes_its_verifier_and_a_wrong_recipient_fails():
    task = _task("sb-mail-009")
    where = task["verifier"]["checks"][0]["where"]
    body = task["verifier"]["checks"][1]["where"]["body"]["contains"]
    for to, expected in ((where["to"], True), ("someone.else@example.org", False)):
        browser, session = _browser()
        browser.post("/sites/mail/compose/", {"to": to, "subject": where["subject"], "body": body})
        assert _verify(task, session) is expected


def test_booking_passes_its_verifier_and_the_wrong_nights_fail():
    task = _task("sb-booking-009")
    key = task["verifier"]["checks"][1]["where"]
    guest = task["verifier"]["checks"][2]["where"]
    for nights, expected in ((key["nights"], True), (key["nights"] + 1, False)):
        browser, session = _browser()
        browser.post(f"/sites/booking/rooms/{key['room_id']}/book/", {
            "date": key["date"], "nights": nights, "guests": 1, "guest_name": guest["guest_name"],
            "email": guest["email"]})
        assert _verify(task, session) is expected


def test_an_info_task_passes_with_the_fact_and_fails_without_it():
    task = _task("sb-booking-001")
    _, session = _browser()
    fact = task["verifier"]["checks"][0]["values"][0]
    assert _verify(task, session, answer=f"It costs €{fact} a night.")
    assert not _verify(task, session, answer="It costs €1 a night.")


def test_a_booking_over_taken_nights_is_refused_with_a_reason():
    browser, session = _browser()
    session.refresh_from_db()
    response = browser.post("/sites/booking/rooms/1/book/", {"date": "2027-03-01", "nights": 1, "guests": 1,
                                                             "guest_name": "Zoë", "email": "z@example.org"})
    assert response.status_code == 400
    assert "already booked" in response.content.decode()


def test_the_sandbox_page_lists_the_sites(viewer_client):
    UserFactory(username="x")
    html = viewer_client.get("/sites/").content.decode()
    assert "Maison Épicerie" in html and "/sites/mail/" in html and "Open a sandbox session" not in html
