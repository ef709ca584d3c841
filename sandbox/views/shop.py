"""Maison Épicerie, the sandbox shop: search, filters, sort, product pages, a cart and checkout."""
from __future__ import annotations

from decimal import Decimal

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sandbox.evidence import sandbox_view
from sandbox.seed import SHOP_CATEGORIES
from sandbox.state import SiteState
from sandbox.views.common import int_field, paginate, query_without_page, row_or_404

SORTS = {"relevance": "Relevance", "price_asc": "Price: low to high", "price_desc": "Price: high to low",
         "rating": "Customer rating", "name": "Name (A–Z)"}
SHIPPING = {"standard": "Standard (3–5 days)", "express": "Express (next day)", "pickup": "Pick up in store"}


def _ctx(**extra) -> dict:
    return {"site_slug": "shop", "site_name": "Maison Épicerie", "categories": list(SHOP_CATEGORIES), **extra}


def _sorted(products: list[dict], sort: str) -> list[dict]:
    keys = {"price_asc": (lambda p: Decimal(p["price"]), False), "price_desc": (lambda p: Decimal(p["price"]), True),
            "rating": (lambda p: p["rating"], True), "name": (lambda p: p["name"].casefold(), False)}
    if sort not in keys:
        return products
    key, reverse = keys[sort]
    return sorted(products, key=key, reverse=reverse)


@require_GET
@sandbox_view("shop")
def home(request: HttpRequest, state: SiteState) -> HttpResponse:
    featured = sorted(state.rows("products"), key=lambda p: -p["rating"])[:4]
    return render(request, "sandbox/shop/home.html", _ctx(featured=featured))


@require_GET
@sandbox_view("shop")
def search(request: HttpRequest, state: SiteState) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    category = request.GET.get("category", "")
    sort = request.GET.get("sort", "relevance")
    products = [p for p in state.rows("products")
                if (not q or q.casefold() in (p["name"] + " " + p["brand"]).casefold())
                and (not category or p["category"] == category)]
    page = paginate(_sorted(products, sort), request)
    return render(request, "sandbox/shop/search.html", _ctx(
        page=page, q=q, category=category, sort=sort, sorts=SORTS, total=len(products),
        keep=query_without_page(request)))


@require_GET
@sandbox_view("shop")
def product(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    return render(request, "sandbox/shop/product.html", _ctx(product=row_or_404(state, "products", pk)))


@require_POST
@sandbox_view("shop")
def cart_add(request: HttpRequest, state: SiteState) -> HttpResponse:
    item = row_or_404(state, "products", request.POST.get("product_id"))
    qty = int_field(request.POST.get("qty"), 1, 1, 20)
    line = next(iter(state.filter("cart_items", product_id=item["id"])), None)
    if line:
        state.update("cart_items", line, qty=min(20, line["qty"] + qty))
    else:
        state.create("cart_items", {"product_id": item["id"], "name": item["name"], "qty": qty, "price": item["price"]})
    return redirect("sandbox:shop_cart")


def _cart_total(lines: list[dict]) -> Decimal:
    return sum((Decimal(x["price"]) * x["qty"] for x in lines), Decimal("0.00"))


@require_GET
@sandbox_view("shop")
def cart(request: HttpRequest, state: SiteState) -> HttpResponse:
    lines = state.rows("cart_items")
    return render(request, "sandbox/shop/cart.html", _ctx(lines=lines, total=_cart_total(lines)))


@require_POST
@sandbox_view("shop")
def cart_update(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    line = row_or_404(state, "cart_items", pk)
    if request.POST.get("remove"):
        state.delete("cart_items", line)
    else:
        state.update("cart_items", line, qty=int_field(request.POST.get("qty"), line["qty"], 1, 20))
    return redirect("sandbox:shop_cart")


@require_http_methods(["GET", "POST"])
@sandbox_view("shop")
def checkout(request: HttpRequest, state: SiteState) -> HttpResponse:
    lines = state.rows("cart_items")
    form = {k: request.POST.get(k, "").strip() for k in ("name", "address", "shipping")}
    errors = []
    if request.method == "POST":
        errors = _checkout_errors(form, lines)
        if not errors:
            order = _place_order(state, form, lines)
            return redirect("sandbox:shop_order", pk=order["id"])
    return render(request, "sandbox/shop/checkout.html", _ctx(
        lines=lines, total=_cart_total(lines), form=form, errors=errors, shipping=SHIPPING),
        status=400 if errors else 200)


def _checkout_errors(form: dict, lines: list[dict]) -> list[str]:
    errors = [f"Please fill in your {k}." for k in ("name", "address") if not form[k]]
    if form["shipping"] not in SHIPPING:
        errors.append("Please choose a shipping method.")
    if not lines:
        errors.append("Your cart is empty.")
    return errors


def _place_order(state: SiteState, form: dict, lines: list[dict]) -> dict:
    items = [{"product_id": x["product_id"], "name": x["name"], "qty": x["qty"], "price": x["price"]} for x in lines]
    order = state.create("orders", {**form, "items": items, "total": str(_cart_total(lines)), "status": "placed"})
    state.delete_many("cart_items", lines)
    return order


@require_GET
@sandbox_view("shop")
def orders(request: HttpRequest, state: SiteState) -> HttpResponse:
    return render(request, "sandbox/shop/orders.html", _ctx(orders=state.rows("orders")))


@require_GET
@sandbox_view("shop")
def order(request: HttpRequest, state: SiteState, pk: int) -> HttpResponse:
    return render(request, "sandbox/shop/order.html", _ctx(order=row_or_404(state, "orders", pk), shipping=SHIPPING))
