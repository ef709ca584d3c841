"""URLs of the validate pages (filled in by its issue)."""

urlpatterns: list = []
