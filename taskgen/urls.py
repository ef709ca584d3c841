"""URLs: the review app at the root, the sandbox websites under /sites/, Django admin, login."""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from taskgen.login_throttle import ThrottledLoginView

# The admin's modules register their models now, not at every process's start (taskgen/admin_app.py).
admin.autodiscover()

# Pages name their icon; browsers still ask for /favicon.ico on pages that do not (the admin, the sandbox sites).
favicon = login_not_required(RedirectView.as_view(url=static("favicon.svg"), permanent=True))

urlpatterns = [
    path("favicon.ico", favicon),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("sites/", include("sandbox.urls")),
    path("", include("review.urls")),
]
