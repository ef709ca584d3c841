"""URLs of the review app. Each page family keeps its own url module so parts grow without touching each other."""
from django.urls import include, path

from review.views import browse, episode

app_name = "review"

urlpatterns = [
    path("", browse.run_list, name="run_list"),
    path("runs/<int:pk>/", browse.run_detail, name="run_detail"),
    path("episodes/<int:pk>/", episode.episode_detail, name="episode_detail"),
    path("episodes/<int:pk>/text/<slug:part>/", episode.episode_text, name="episode_text"),
    path("blobs/<str:sha256>/", browse.blob, name="blob"),
    path("blobs/<str:sha256>/thumb/", browse.blob_thumbnail, name="blob_thumbnail"),
    path("", include("review.urls_review")),
    path("", include("review.urls_validate")),
    path("", include("review.urls_pipeline")),
    path("", include("review.urls_tasks")),
]
