"""The data engine's REST API: read where a role needs it (scoped by flywheel.access), write where a
role acts."""
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import APIException
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from accounts.api import model_serializer, role_viewset
from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR, MANAGER
from flywheel import access
from flywheel import models as m
from flywheel.collection.launch import cancel_run, launch_run, select_queries, selection_hint
from flywheel.collection.run_config import clean_launch
from flywheel.model_endpoints import ENDPOINT_FIELDS, EndpointChangeRefused, change_endpoint, may_change_endpoint
from flywheel.policies import unservable_reason
from flywheel.pools.badcase import FORMAT_HELP, BadCasesInvalid, import_cases, parse_cases
from flywheel.queries.jsonl import ImportProblem, QueryImportError, export_queries, import_queries
from flywheel.queries.uploads import ImportTooLarge, check_declared_size, check_text, read_stream, read_upload
from flywheel.queries.vocabulary import vocabulary_errors
from flywheel.rules.query_keys import query_key_problem

STAFF = (MANAGER, ADMIN)


class QueryImportSerializer(serializers.Serializer):
    file = serializers.FileField(required=False, help_text="a .jsonl file")
    text = serializers.CharField(required=False, help_text="JSONL text", trim_whitespace=False)


def query_import_text(request):
    """The JSONL of an import request (a file, an x-ndjson body or a `text` field), size-checked
    (QUERY_IMPORT_MAX_BYTES) before it is read where the request declares its size."""
    check_declared_size(request)
    if request.content_type and request.content_type.startswith("application/x-ndjson"):
        return read_stream(request.stream) if request.stream is not None else ""
    upload = request.FILES.get("file")
    if upload is not None:
        return read_upload(upload)
    fields = request.data if hasattr(request.data, "get") else {}  # a JSON array or string is no form
    text = fields.get("text", "")
    if not isinstance(text, str):
        raise QueryImportError([ImportProblem(0, "text", "must be a string of JSONL")])
    return check_text(text)


class QuerySerializer(model_serializer(m.Query, read_only=("evaluation_only", "locked"))):
    """Held-out and frozen change only through the benchmark's own workflow (benchmark/versions.py)."""

    def validate_key(self, key):
        """The same safe characters as at import (flywheel/rules/query_keys.py)."""
        problem = query_key_problem(key)
        if problem:
            raise serializers.ValidationError(problem)
        return key

    def validate(self, attrs):
        """Subclass, persona and capabilities come from the fixed vocabularies, as at import."""
        def current(name, default):
            return attrs.get(name, getattr(self.instance, name, default) if self.instance else default)

        capabilities = current("capabilities", [])
        if not isinstance(capabilities, list):
            raise serializers.ValidationError({"capabilities": "must be a list of capability names"})
        errors = vocabulary_errors(current("tier", ""), current("subclass", ""), current("persona", ""),
                                   capabilities)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


_QueryBase = role_viewset(m.Query, write_roles=STAFF, serializer=QuerySerializer,
                          queryset=m.Query.objects.prefetch_related("app_links__app"),
                          filter_fields=("tier", "status", "source", "key"))


class QueryFrozen(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "query_locked"


class QueryViewSet(_QueryBase):
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    def perform_update(self, serializer):
        """A query frozen into a benchmark version keeps what it asks: a conflict, not a crash."""
        try:
            super().perform_update(serializer)
        except m.QueryLocked as error:
            raise QueryFrozen(str(error)) from error

    @extend_schema(request=QueryImportSerializer,
                   responses={200: OpenApiResponse(description="counts of created/updated"),
                              400: OpenApiResponse(description="problems with line and field"),
                              413: OpenApiResponse(description="over QUERY_IMPORT_MAX_BYTES")})
    @action(detail=False, methods=["post"], url_path="import")
    def import_jsonl(self, request):
        """Import queries from JSONL; a file with any malformed line imports nothing."""
        try:
            result = import_queries(query_import_text(request))
        except ImportTooLarge as error:
            return Response({"problems": [{"line": 0, "field": "(file)", "message": str(error)}]},
                            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
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
class ModelVersionSerializer(model_serializer(m.ModelVersion)):
    """Where a version is served changes only through change_endpoint, which decides who may."""

    def create(self, validated_data):
        if validated_data.get("endpoint_url") and not may_change_endpoint(self.context["request"].user):
            raise EndpointChangeRefused("Only an admin may register a model endpoint.")
        return super().create(validated_data)

    def update(self, instance, validated_data):
        wanted = {f: validated_data.pop(f, getattr(instance, f)) for f in ENDPOINT_FIELDS}
        with transaction.atomic():
            if any(wanted[f] != getattr(instance, f) for f in ENDPOINT_FIELDS):
                instance = change_endpoint(instance, by=self.context["request"].user, **wanted)
            return super().update(instance, validated_data)


ModelVersionViewSet = role_viewset(m.ModelVersion, write_roles=(ADMIN,), serializer=ModelVersionSerializer,
                                   filter_fields=("kind",))


class CollectionRunSerializer(model_serializer(m.CollectionRun, read_only=(
        "status", "total", "completed", "created_by", "celery_task_id", "finished_at"))):
    def validate(self, attrs):
        """The run form's own check (run_config.clean_launch), then: something must match."""
        try:
            line, query_filter, config = clean_launch(attrs.get("line"), attrs.get("query_filter") or {},
                                                      attrs.get("config") or {})
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.messages)
        if not select_queries(query_filter).exists():
            raise serializers.ValidationError(f"No query matches that selection. {selection_hint()}")
        if unservable_reason(attrs.get("model_version")):
            raise serializers.ValidationError(unservable_reason(attrs["model_version"]))
        return {**attrs, "line": line, "query_filter": query_filter, "config": config}


_CollectionRunBase = role_viewset(m.CollectionRun, read_roles=STAFF, write_roles=STAFF,
                                  filter_fields=("line", "status"), serializer=CollectionRunSerializer)


class CollectionRunViewSet(_CollectionRunBase):
    http_method_names = ["get", "post", "head", "options"]

    def perform_create(self, serializer):
        """Creating a run launches it: work items are planned and sent to the phone hosts."""
        data = serializer.validated_data
        serializer.instance = launch_run(data["line"], data["query_filter"], data.get("model_version"),
                                         data["config"], user=self.request.user)

    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.get_object()
        cancel_run(run)
        run.refresh_from_db()
        return Response(self.get_serializer(run).data)


# What a workflow writes (trajectories, steps, votes, verdicts, attributions, repairs, pool entries)
# is read-only here, and each person sees only what flywheel.access lets them see. Adjudication
# has its own API in annotation.api (claim, release, decide), over the same services as its pages.
TrajectoryViewSet = role_viewset(
    m.Trajectory, filter_fields=("line", "verdict", "destination", "status", "query", "run"),
    queryset=m.Trajectory.objects.select_related("query"), visible=access.trajectories_visible_to)
StepViewSet = role_viewset(m.Step, filter_fields=("trajectory",), visible=access.steps_visible_to)
VoteViewSet = role_viewset(m.Vote, read_roles=(ADJUDICATOR, MANAGER), filter_fields=("trajectory", "system"),
                           visible=access.with_visible_trajectory)
VerdictViewSet = role_viewset(m.Verdict, read_roles=(ADJUDICATOR, MANAGER),
                              filter_fields=("trajectory", "outcome"), visible=access.with_visible_trajectory)
AttributionViewSet = role_viewset(m.Attribution, read_roles=(ANNOTATOR, MANAGER),
                                  filter_fields=("trajectory", "level"), visible=access.with_visible_trajectory)
# Repairs are written by the ECDM repair workflow only (Teacher, then human fallback).
RepairViewSet = role_viewset(m.Repair, read_roles=(ANNOTATOR, MANAGER),
                             filter_fields=("trajectory", "path", "status"), visible=access.repairs_visible_to)
CptEntryViewSet = role_viewset(m.CptEntry, read_roles=STAFF)
SftEntryViewSet = role_viewset(m.SftEntry, read_roles=STAFF, filter_fields=("intake",))
_RlQueryEntryBase = role_viewset(m.RlQueryEntry, read_roles=STAFF, filter_fields=("state", "channel"))


class BadCasesSerializer(serializers.Serializer):
    cases = serializers.ListField(child=serializers.DictField(), help_text=FORMAT_HELP)


class RlQueryEntryViewSet(_RlQueryEntryBase):
    write_roles = (MANAGER,)  # only the BadCase intake below writes; the entries stay read-only

    @extend_schema(request=BadCasesSerializer,
                   responses={200: OpenApiResponse(description="created, existing, measuring; per case its key"),
                              400: OpenApiResponse(description="every problem, by case; nothing written"),
                              413: OpenApiResponse(description="over QUERY_IMPORT_MAX_BYTES")})
    @action(detail=False, methods=["post"], url_path="badcases")
    def badcases(self, request):
        """Failed real-user cases ({"cases": [{goal, apps, notes}]}, or a JSONL/CSV `file`) become
        queries of the BadCase channel, each sent through the RL pool's Phase-1 gate."""
        try:
            upload = request.FILES.get("file")
            if upload is not None:
                records = parse_cases(read_upload(upload), upload.name)
            else:
                check_declared_size(request)
                body = request.data
                records = body.get("cases") if isinstance(body, dict) else body
            result = import_cases(records)
        except ImportTooLarge as error:
            return Response({"problems": [str(error)]}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        except UnicodeDecodeError:
            return Response({"problems": ["the file is not UTF-8 text"]}, status=status.HTTP_400_BAD_REQUEST)
        except BadCasesInvalid as error:
            return Response({"problems": error.problems}, status=status.HTTP_400_BAD_REQUEST)
        return Response(result)
RlRolloutViewSet = role_viewset(m.RlRollout, read_roles=STAFF, filter_fields=("entry",))


def register(router):
    for prefix, viewset in [
        ("queries", QueryViewSet), ("apps", AppViewSet), ("function-nodes", FunctionNodeViewSet),
        ("gem-pages", GemPageViewSet), ("gem-edges", EdgeViewSet),
        ("model-versions", ModelVersionViewSet), ("collection-runs", CollectionRunViewSet),
        ("trajectories", TrajectoryViewSet), ("steps", StepViewSet), ("votes", VoteViewSet),
        ("verdicts", VerdictViewSet),
        ("attributions", AttributionViewSet), ("repairs", RepairViewSet),
        ("pools/cpt", CptEntryViewSet), ("pools/sft", SftEntryViewSet),
        ("pools/rl", RlQueryEntryViewSet), ("pools/rl-rollouts", RlRolloutViewSet),
    ]:
        router.register(prefix, viewset, basename=prefix.replace("/", "-"))
