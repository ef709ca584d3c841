"""URLs of the pipeline pages (filled in by its issue)."""

urlpatterns: list = []
