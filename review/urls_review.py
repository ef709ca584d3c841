"""URLs of the review pages (filled in by its issue)."""

urlpatterns: list = []
