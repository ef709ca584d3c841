"""URLs of the validate page and its downloads (all take the page's query string)."""
from django.urls import path

from review.views import validate

urlpatterns = [
    path("validate/", validate.validate_page, name="validate"),
    path("validate/figures.json", validate.validate_json, name="validate_json"),
    path("validate/figures.csv", validate.validate_csv, name="validate_csv"),
    path("validate/false_positives.txt", validate.validate_false_positives, name="validate_false_positives"),
]
