from django.apps import AppConfig


class TaskgenConfig(AppConfig):
    name = "taskgen"
    verbose_name = "Pipeline"

    def ready(self) -> None:
        """The composition root: the settings that name the app's own things are checked, the stages register
        with the engine (which imports none of them), and the engine learns how to load the Celery app."""
        from taskgen.engine.send import celery_app_set
        from taskgen.stages import stages_register
        from taskgen.startup import settings_check

        settings_check()
        stages_register()
        celery_app_set(_celery_app)


def _celery_app():
    """The Celery app, imported when the engine sends its first message (85 ms a process start does without)."""
    from taskgen.celery import app

    return app
