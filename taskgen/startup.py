"""Settings that name something the app defines (a provider, a harness, an image policy) are checked against its
definition when Django starts (TaskgenConfig.ready), in every process (web, worker, command): a bad value stops the
process at start, naming the variable, as the settings' own checks do. settings.py itself reads the environment
only, so it imports none of the app's code."""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from taskgen.harness.external import external_harnesses
from taskgen.providers import provider_check
from taskgen.stages.judge.images import image_policy


def settings_check() -> None:
    """Raise ImproperlyConfigured naming the first environment variable whose value the app does not know."""
    checks = (("TASKGEN_JUDGE_PROVIDER", lambda: provider_check(settings.JUDGE_PROVIDER, "judge")),
              ("TASKGEN_JUDGE_IMAGE_POLICY", lambda: image_policy(settings.JUDGE_IMAGE_POLICY)),
              ("TASKGEN_EXTERNAL_HARNESSES", external_harnesses))
    for variable, check in checks:
        try:
            check()
        except ValueError as exc:
            raise ImproperlyConfigured(f"{variable}: {exc}") from exc
