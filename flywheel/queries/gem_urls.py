"""/gem/: the Global Environment Memory drawn, its path finder, and device priors."""
from django.urls import path

from flywheel.queries import gem_views

urlpatterns = [
    path("", gem_views.gem_page, name="gem"),
    path("graph.json", gem_views.gem_graph_json, name="gem-graph-json"),
    path("path.json", gem_views.gem_path_json, name="gem-path-json"),
    path("priors/", gem_views.prior_list, name="gem-priors"),
    path("priors/<int:pk>/", gem_views.prior_edit, name="gem-prior-edit"),
    path("priors/<int:pk>/delete/", gem_views.prior_delete, name="gem-prior-delete"),
]
