"""The data engine's REST API: read where a role needs it, write where a role acts."""
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from accounts.api import model_serializer, role_viewset
from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR, MANAGER
from flywheel import models as m
from flywheel.queries.jsonl import QueryImportError, export_queries, import_queries

STAFF = (MANAGER, ADMIN)


class QueryImportSerializer(serializers.Serializer):
    file = serializers.FileField(required=False, help_text="a .jsonl file")
    text = serializers.CharField(required=False, help_text="JSONL text", trim_whitespace=False)


def query_import_text(request):
    upload = request.FILES.get("file")
    if upload is not None:
        return upload.read().decode("utf-8")
    if request.content_type and request.content_type.startswith("application/x-ndjson"):
        return request.body.decode("utf-8")
    return request.data.get("text", "")


_QueryBase = role_viewset(m.Query, write_roles=STAFF,
                          queryset=m.Query.objects.prefetch_related("app_links__app"),
                          filter_fields=("tier", "status", "source", "key"))


class QueryViewSet(_QueryBase):
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(request=QueryImportSerializer,
                   responses={200: OpenApiResponse(description="counts of created/updated"),
                              400: OpenApiResponse(description="problems with line and field")})
    @action(detail=False, methods=["post"], url_path="import")
    def import_jsonl(self, request):
        """Import queries from JSONL; a file with any malformed line imports nothing."""
        try:
            result = import_queries(query_import_text(request))
        except UnicodeDecodeError:
            return Response({"problems": [{"line": 0, "field": "(file)", "message": "not UTF-8"}]},
                            status=status.HTTP_400_BAD_REQUEST)
        except QueryImportError as error:
            return Response({"problems": [p.__dict__ for p in error.problems]},
                            status=status.HTTP_400_BAD_REQUEST)
        return Response(result)

    @extend_schema(responses={(200, "application/x-ndjson"): str})
    @action(detail=False, methods=["get"], url_path="export")
    def export_jsonl(self, request):
        """Every query (filters apply) in the import format."""
        response = StreamingHttpResponse(export_queries(self.get_queryset()),
                                         content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="queries.jsonl"'
        return response


AppViewSet = role_viewset(m.App, write_roles=STAFF, filter_fields=("category",))
FunctionNodeViewSet = role_viewset(m.FunctionNode, write_roles=STAFF,
                                   filter_fields=("app", "status", "is_leaf"))
GemPageViewSet = role_viewset(m.GemPage, write_roles=STAFF, filter_fields=("app",))
EdgeViewSet = role_viewset(m.Edge, write_roles=STAFF, filter_fields=("kind",))
ModelVersionViewSet = role_viewset(m.ModelVersion, write_roles=(ADMIN,), filter_fields=("kind",))
_CollectionRunBase = role_viewset(
    m.CollectionRun, read_roles=STAFF, write_roles=STAFF, filter_fields=("line", "status"),
    serializer=model_serializer(m.CollectionRun, read_only=(
        "status", "total", "completed", "created_by", "celery_task_id", "finished_at")))


class CollectionRunViewSet(_CollectionRunBase):
    http_method_names = ["get", "post", "head", "options"]

    def perform_create(self, serializer):
        """Creating a run launches it: work items are planned and sent to the phone hosts."""
        from rest_framework.exceptions import ValidationError

        from flywheel.collection.runs import launch_run

        data = serializer.validated_data
        if data["line"] not in ("automatic", "schema", "external"):
            raise ValidationError({"line": "collection runs are automatic, schema or external"})
        run = launch_run(data["line"], data.get("query_filter") or {}, data.get("model_version"),
                         data.get("config") or {}, user=self.request.user)
        serializer.instance = run

    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        from flywheel.collection.runs import cancel_run

        run = self.get_object()
        cancel_run(run)
        run.refresh_from_db()
        return Response(self.get_serializer(run).data)
TrajectoryViewSet = role_viewset(
    m.Trajectory, filter_fields=("line", "verdict", "destination", "status", "query", "run"),
    queryset=m.Trajectory.objects.select_related("query"))
StepViewSet = role_viewset(m.Step, filter_fields=("trajectory",))
VoteViewSet = role_viewset(m.Vote, read_roles=(ADJUDICATOR, MANAGER), filter_fields=("trajectory", "system"))
VerdictViewSet = role_viewset(m.Verdict, read_roles=(ADJUDICATOR, MANAGER),
                              filter_fields=("trajectory", "outcome"))
AdjudicationViewSet = role_viewset(
    m.Adjudication, read_roles=(ADJUDICATOR, MANAGER), write_roles=(ADJUDICATOR,),
    filter_fields=("trajectory", "decision"),
    serializer=model_serializer(m.Adjudication, read_only=("adjudicator", "decided_at")))
AttributionViewSet = role_viewset(m.Attribution, read_roles=(ANNOTATOR, MANAGER),
                                  filter_fields=("trajectory", "level"))
RepairViewSet = role_viewset(m.Repair, read_roles=(ANNOTATOR, MANAGER), write_roles=(ANNOTATOR,),
                             filter_fields=("trajectory", "path", "status"))
CptEntryViewSet = role_viewset(m.CptEntry, read_roles=STAFF)
SftEntryViewSet = role_viewset(m.SftEntry, read_roles=STAFF, filter_fields=("intake",))
RlQueryEntryViewSet = role_viewset(m.RlQueryEntry, read_roles=STAFF, filter_fields=("state",))
RlRolloutViewSet = role_viewset(m.RlRollout, read_roles=STAFF, filter_fields=("entry",))


def register(router):
    for prefix, viewset in [
        ("queries", QueryViewSet), ("apps", AppViewSet), ("function-nodes", FunctionNodeViewSet),
        ("gem-pages", GemPageViewSet), ("gem-edges", EdgeViewSet),
        ("model-versions", ModelVersionViewSet), ("collection-runs", CollectionRunViewSet),
        ("trajectories", TrajectoryViewSet), ("steps", StepViewSet), ("votes", VoteViewSet),
        ("verdicts", VerdictViewSet), ("adjudications", AdjudicationViewSet),
        ("attributions", AttributionViewSet), ("repairs", RepairViewSet),
        ("pools/cpt", CptEntryViewSet), ("pools/sft", SftEntryViewSet),
        ("pools/rl", RlQueryEntryViewSet), ("pools/rl-rollouts", RlRolloutViewSet),
    ]:
        router.register(prefix, viewset, basename=prefix.replace("/", "-"))
