"""URLs of the sandbox websites under /sites/<slug>/ (filled in by the sandbox issue)."""

urlpatterns: list = []
