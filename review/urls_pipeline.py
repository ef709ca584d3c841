"""URLs of the runs page (pipeline starts, progress, cancel, resume) and the export history."""
from django.urls import path

from review.views import exports, pipeline

urlpatterns = [
    path("pipeline/", pipeline.pipeline_list, name="pipeline_list"),
    path("pipeline/export-preview/", pipeline.export_preview, name="export_preview"),
    path("pipeline/start/<str:stage>/", pipeline.pipeline_start, name="pipeline_start"),
    path("pipeline/<int:pk>/", pipeline.pipeline_detail, name="pipeline_detail"),
    path("pipeline/<int:pk>/progress/", pipeline.pipeline_progress, name="pipeline_progress"),
    path("pipeline/<int:pk>/cancel/", pipeline.pipeline_cancel, name="pipeline_cancel"),
    path("pipeline/<int:pk>/resume/", pipeline.pipeline_resume, name="pipeline_resume"),
    path("exports/", exports.export_list, name="export_list"),
    path("exports/labels.jsonl", exports.labels_download, name="labels_download"),
    path("exports/labels/restore/", exports.labels_upload, name="labels_upload"),
    path("exports/labels/restore/<int:pk>/refused.txt", exports.labels_restore_refused, name="labels_restore_refused"),
    path("exports/<int:pk>/", exports.export_detail, name="export_detail"),
    path("exports/<int:pk>/manifest.json", exports.export_manifest, name="export_manifest"),
    path("exports/<int:pk>/download.tar.gz", exports.export_download, name="export_download"),
]
