"""Views of the review app, one module per page family."""
