"""Function-tree pruning pages (included at /function-trees/)."""
from django.urls import path

from annotation import tree_views

urlpatterns = [
    path("", tree_views.tree_list, name="function-trees"),
    path("<int:app_id>/", tree_views.tree_detail, name="function-tree"),
    path("<int:app_id>/build/", tree_views.build, name="function-tree-build"),
    path("<int:app_id>/nodes/<int:node_id>/screenshot/", tree_views.node_screenshot, name="function-tree-shot"),
    path("<int:app_id>/nodes/<int:node_id>/<slug:action>/", tree_views.node_action, name="function-tree-action"),
]
