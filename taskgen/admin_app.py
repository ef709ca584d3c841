"""The admin's app config: its modules (taskgen/admin.py, review/admin.py and what they import: the pages' summary
words, the judge's prompt, the stages' start, the auth admin's forms) are imported when the admin is used, not at
every process's start, where Django's own AdminConfig imports them all (25-35 ms of each command's and worker's CPU).

Two things use the admin's registrations: its pages, whose URL conf discovers the modules first (taskgen/urls.py), and
its system checks, which run here after the same discovery: the checks' order is a set's, so they cannot count on the
URL conf's check having loaded the URL conf before them (`manage.py check --tag admin` never loads it).
"""
from __future__ import annotations

from django.contrib.admin import autodiscover
from django.contrib.admin.apps import SimpleAdminConfig
from django.contrib.admin.checks import check_admin_app, check_dependencies
from django.core import checks


class AdminConfig(SimpleAdminConfig):
    def ready(self) -> None:
        """Register the admin's checks as Django's AdminConfig does, with the discovery its own ready() did."""
        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(_check_admin_discovered, checks.Tags.admin)


def _check_admin_discovered(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Each admin site's checks, once every app's admin module has registered its models."""
    autodiscover()
    return check_admin_app(app_configs, **kwargs)
