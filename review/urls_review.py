"""URLs of the review workbench: label and adjudication posts, queues, the adjudication list."""
from django.urls import path

from review.views import certify, episode, queues, reviewers

urlpatterns = [
    path("episodes/<int:pk>/label/", episode.label_post, name="label_post"),
    path("episodes/<int:pk>/adjudicate/", episode.adjudicate_post, name="adjudicate_post"),
    path("queues/", queues.queue_list, name="queue_list"),
    path("queues/new/", queues.queue_create, name="queue_create"),
    path("queues/certify/", certify.certify_open, name="certify_open"),
    path("certify/", certify.certificate_panel, name="certificate_panel"),
    path("queues/from-episodes/", queues.queue_from_episodes, name="queue_from_episodes"),
    path("queues/<int:pk>/", queues.queue_detail, name="queue_detail"),
    path("queues/<int:pk>/progress/", queues.queue_progress_cell, name="queue_progress"),
    path("queues/<int:pk>/next/", queues.queue_next, name="queue_next"),
    path("queues/<int:pk>/checks/", queues.queue_check_rate, name="queue_check_rate"),
    path("queues/<int:pk>/previous/<int:episode_pk>/", queues.queue_previous, name="queue_previous"),
    path("queues/<int:pk>/release/", queues.queue_release, name="queue_release"),
    path("adjudication/", queues.adjudication, name="adjudication"),
    path("reviewers/", reviewers.reviewers, name="reviewers"),
]
