from django.apps import AppConfig


class TaskgenConfig(AppConfig):
    name = "taskgen"
    verbose_name = "Pipeline"

    def ready(self) -> None:
        """The composition root: the settings that name the app's own things are checked, the engine learns where
        each stage's work is (it imports none of them: each is imported when first asked for), and how to load the
        Celery app."""
        from taskgen.engine.send import celery_app_set
        from taskgen.engine.stage_table import stage_modules_register
        from taskgen.stages import stage_work_modules
        from taskgen.startup import settings_check

        settings_check()
        stage_modules_register(stage_work_modules())
        celery_app_set(_celery_app)


def _celery_app():
    """The Celery app, imported when the engine sends its first message (85 ms a process start does without)."""
    from taskgen.celery import app

    return app
