"""/gem/: the Global Environment Memory drawn, its path finder, and device priors."""
from django.urls import path

from flywheel.queries.gem import views

urlpatterns = [
    path("", views.gem_page, name="gem"),
    path("graph.json", views.gem_graph_json, name="gem-graph-json"),
    path("path.json", views.gem_path_json, name="gem-path-json"),
    path("priors/", views.prior_list, name="gem-priors"),
    path("priors/<int:pk>/", views.prior_edit, name="gem-prior-edit"),
    path("priors/<int:pk>/delete/", views.prior_delete, name="gem-prior-delete"),
]
