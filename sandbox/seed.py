"""Deterministic seed data of the sandbox sites: the same rows in every session, with accents and quotes in names.

Every session starts from `seed_site(slug)`; tasks and their verifiers are written against these rows.
"""
from __future__ import annotations

import copy
import random
from functools import cache

SITES = {
    "shop": "Maison Épicerie (shop)",
    "mail": "Courrier Mail (webmail)",
    "booking": "Séjour Rooms (booking)",
}

SHOP_CATEGORIES = {
    "coffee": ["Café \"Noir\" Espresso Beans", "Crème Roast Ground Coffee", "Kenyan AA Whole Beans", "Décaf Colombia",
               "Moka Pot Blend", "Cold Brew Coarse Grind", "Ethiopian Yirgacheffe", "Brazil Santos Bourbon"],
    "tea": ["Earl Grey \"Crème\"", "Jasmine Pearl Green Tea", "Rooibos Vanille", "Darjeeling First Flush",
            "Genmaicha", "Thé à la Menthe", "Lapsang Souchong", "Chamomile Bedtime"],
    "kitchen": ["Crème Brûlée Torch", "Cast-Iron Crêpe Pan", "Chef's Knife 20 cm", "Bamboo Cutting Board",
                "Pour-Over Kettle", "Mandoline \"Précision\" Slicer", "Enamel Dutch Oven", "Whisk Set"],
    "books": ["L'Art de la Cuisine", "Coffee: A Field Guide", "Tea Gardens of Darjeeling", "The Baker's \"Secret\"",
              "Pâtisserie at Home", "Fermentation Basics", "Über Bread", "Salt, Fat, Heat"],
    "garden": ["Herb Planter Trio", "Basil Seeds \"Genovese\"", "Watering Can 5 L", "Pruning Shears",
               "Compost Bin", "Tomato Cage", "Garden Gloves (Suède)", "Lavender Seedlings"],
    "toys": ["Wooden Café Play Set", "Tea Party Set", "Mini Chef's Apron", "Pâte à Modeler Kit",
             "Toy Espresso Machine", "Picnic Basket Playset", "Crêpe Stand Playset", "Garden Tool Kit (kids)"],
}
BRANDS = ["Maison Dupré", "Atelier Noël", "Kōhī Co.", "O'Brien & Sons", "Grünwald"]

CONTACTS = [
    ("Amélie Dubois", "amelie.dubois@example.org", "Atelier Noël", "+33 1 42 68 53 01"),
    ("Björn Åkesson", "bjorn.akesson@example.org", "Grünwald", "+46 8 555 019 22"),
    ("Chloé O'Neill", "chloe.oneill@example.org", "O'Brien & Sons", "+353 1 555 0147"),
    ("Dmitri Volkov", "dmitri.volkov@example.org", "Volkov Imports", "+7 495 555 0199"),
    ("Elena García", "elena.garcia@example.org", "Séjour Rooms", "+34 91 555 0123"),
    ("François Martin", "francois.martin@example.org", "Maison Dupré", "+33 4 72 55 01 88"),
    ("Günter Schäfer", "guenter.schaefer@example.org", "Grünwald", "+49 30 555 0172"),
    ("Hiroko Tanaka", "hiroko.tanaka@example.org", "Kōhī Co.", "+81 3 5550 1234"),
    ("Inès Moreau", "ines.moreau@example.org", "Atelier Noël", "+33 5 61 55 02 40"),
    ("José Pereira", "jose.pereira@example.org", "Pereira & Filhos", "+351 21 555 0110"),
    ("Katarzyna Nowak", "katarzyna.nowak@example.org", "Nowak Design", "+48 22 555 0166"),
    ("Léa \"Lou\" Fontaine", "lea.fontaine@example.org", "Maison Dupré", "+33 3 88 55 03 17"),
]
SUBJECTS = [
    "Quarterly report — Q3 figures", "Lunch on Friday?", "Invoice #4471 for \"Crème\" order", "Team offsite in Lyon",
    "Re: shipping delay", "Your café order has shipped", "Draft contract (v2)", "Photos from the Noël party",
    "Budget review at 14:00", "New supplier: Kōhī Co.", "Holiday rota", "Catalogue proofs — please check",
    "Meeting notes: São Paulo call", "Password reset reminder", "Welcome aboard, Inès!", "Garden party plans",
    "Tasting menu feedback", "Parking at the new office", "Year-end inventory", "Newsletter: L'Été issue",
    "Refund for order 1032", "Conference badge pick-up", "Translation of the brochure", "Coffee machine is fixed",
]
FOLDERS = ["inbox", "archive", "sent", "trash"]

CITIES = ["Lyon", "Zürich", "São Paulo", "Kraków", "Montréal", "Reykjavík"]
ROOM_NAMES = ["Le Petit Salon", "Suite \"Étoile\"", "Chambre Bleue", "The Baker's Loft", "Atelier Studio",
              "Garden Room", "Maison d'Été", "Skyline Double"]
AMENITIES = ["wifi", "breakfast", "balcony", "kitchenette", "parking", "bathtub"]
MONTHS = ["2027-03", "2027-04", "2027-05"]


def _shop(rng: random.Random) -> dict[str, list[dict]]:
    products, n = [], 0
    for category, names in SHOP_CATEGORIES.items():
        for name in names:
            n += 1
            products.append({"id": n, "name": name, "category": category, "brand": BRANDS[n % len(BRANDS)],
                             "price": f"{rng.randint(3, 180)}.{rng.choice(['00', '50', '90', '95', '25'])}",
                             "rating": rng.choice([3.1, 3.5, 3.8, 4.0, 4.2, 4.4, 4.6, 4.8, 4.9]) + (n % 7) / 100,
                             "stock": rng.randint(0, 40), "description": f"{name} by {BRANDS[n % len(BRANDS)]}."})
    for p in products:
        p["rating"] = round(p["rating"], 2)
    return {"products": products, "cart_items": [], "orders": []}


def _mail(rng: random.Random) -> dict[str, list[dict]]:
    contacts = [{"id": i + 1, "name": n, "email": e, "company": c, "phone": p}
                for i, (n, e, c, p) in enumerate(CONTACTS)]
    messages = []
    for i in range(48):
        who = contacts[(i * 5) % len(contacts)]
        folder = FOLDERS[0] if i < 26 else FOLDERS[1 + (i % 3)]
        mine = folder == "sent"
        messages.append({
            "id": i + 1, "folder": folder, "subject": SUBJECTS[i % len(SUBJECTS)] + ("" if i < 24 else " (follow-up)"),
            "sender": "me@courrier.example" if mine else who["email"], "sender_name": "Me" if mine else who["name"],
            "to": who["email"] if mine else "me@courrier.example",
            "body": f"Hello,\n\nAbout \"{SUBJECTS[i % len(SUBJECTS)]}\": reference {1000 + i * 7}.\n\nBest, "
                    + ("me" if mine else who["name"].split()[0]),
            "date": f"2027-02-{1 + (47 - i) % 28:02d} {8 + i % 10:02d}:{(i * 13) % 60:02d}",
            "read": i % 3 == 0, "starred": i % 11 == 0,
        })
    messages.sort(key=lambda m: m["date"], reverse=True)
    return {"contacts": contacts, "messages": messages}


def _booking(rng: random.Random) -> dict[str, list[dict]]:
    rooms, n = [], 0
    for city in CITIES:
        for name in rng.sample(ROOM_NAMES, 4):
            n += 1
            rooms.append({"id": n, "name": f"{name}, {city}", "city": city, "capacity": rng.randint(1, 6),
                          "price": rng.randint(60, 320), "amenities": sorted(rng.sample(AMENITIES, 3))})
    bookings = []
    for i in range(18):
        room = rooms[(i * 7) % len(rooms)]
        bookings.append({"id": i + 1, "room_id": room["id"], "room_name": room["name"],
                         "date": f"{MONTHS[i % 3]}-{1 + (i * 5) % 27:02d}", "nights": 1 + i % 3, "guests": 1,
                         "guest_name": CONTACTS[i % len(CONTACTS)][0], "email": CONTACTS[i % len(CONTACTS)][1],
                         "notes": "", "status": "confirmed"})
    return {"rooms": rooms, "bookings": bookings}


@cache
def _seed(slug: str) -> dict[str, list[dict]]:
    makers = {"shop": _shop, "mail": _mail, "booking": _booking}
    if slug not in makers:
        raise KeyError(f"no sandbox site {slug!r}")
    return makers[slug](random.Random(f"sandbox:{slug}:1"))


def seed_site(slug: str) -> dict[str, list[dict]]:
    """A fresh, deep copy of the site's seed rows (never share the cached one: sessions mutate theirs)."""
    return copy.deepcopy(_seed(slug))
