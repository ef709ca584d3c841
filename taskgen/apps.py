from django.apps import AppConfig


class TaskgenConfig(AppConfig):
    name = "taskgen"
    verbose_name = "Pipeline"

    def ready(self) -> None:
        """The composition root: the settings that name the app's own things are checked, and the stages register
        with the engine (which imports none of them)."""
        from taskgen.stages import stages_register
        from taskgen.startup import settings_check

        settings_check()
        stages_register()
