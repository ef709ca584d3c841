"""URLs of the Tasks pages (proposed tasks and their review)."""
from django.urls import path

from review.views import tasks

urlpatterns = [
    path("tasks/", tasks.task_sites, name="task_sites"),
    path("tasks/site/<slug:slug>/", tasks.site_tasks, name="site_tasks"),
    path("tasks/site/<slug:slug>/bulk/", tasks.tasks_bulk, name="tasks_bulk"),
    path("tasks/<int:pk>/edit/", tasks.task_edit_page, name="task_edit"),
    path("tasks/<int:pk>/flag/", tasks.task_flag_post, name="task_flag"),
    path("tasks/batches/<int:pk>/", tasks.proposal_batch_detail, name="proposal_batch"),
]
