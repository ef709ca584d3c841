"""`manage.py taskgen ...` runs Django's system checks but the web's own (the URL conf's, the admin's and the
templates', which import every page and every template tag library at each command's start); `manage.py check` runs them
all."""
from __future__ import annotations

import io

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

pytestmark = pytest.mark.django_db


@pytest.fixture
def failing_check():
    """Register a check that fails under a tag; unregistered after the test."""
    registered = []

    def register(tag: str) -> None:
        def broken(app_configs=None, **kwargs):
            return [checks.Error(f"broken {tag} check", id="tests.E001")]

        checks.register(broken, tag)
        registered.append(broken)

    yield register
    for check in registered:
        checks.registry.registry.registered_checks.discard(check)


def _taskgen_runs() -> bool:
    try:
        call_command("taskgen", "resume", "999999", stdout=io.StringIO(), stderr=io.StringIO(), skip_checks=False)
    except SystemCheckError:
        return False
    except SystemExit:
        pass  # the command ran (and said there is no such run)
    return True


def test_a_model_check_that_fails_stops_a_pipeline_command(failing_check):
    failing_check(checks.Tags.models)
    assert not _taskgen_runs()


def test_the_admins_checks_are_left_to_manage_py_check(failing_check):
    failing_check(checks.Tags.admin)
    assert _taskgen_runs()
    with pytest.raises(SystemCheckError, match="broken admin check"):
        call_command("check")


def test_the_templates_checks_are_left_to_manage_py_check(failing_check):
    failing_check(checks.Tags.templates)
    assert _taskgen_runs()
    with pytest.raises(SystemCheckError, match="broken templates check"):
        call_command("check")
