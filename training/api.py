"""Snapshots and training runs over the API, through the same services as the pages.

A snapshot is created by exporting (training.snapshots.create_snapshot); a run by launching it
(training.runs.create_run: a config with an unknown key is a 400 that names it). What a run writes
(status, progress, metrics, checkpoint, produced model) is read-only; cancel and resume are actions.
Neither can be edited or deleted: a snapshot is the record of what a model was trained on.
"""
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.api import role_viewset
from accounts.roles import ADMIN, MANAGER
from flywheel.models import ModelVersion
from training.config import ConfigError
from training.models import DataSnapshot, TrainingRun
from training.runs import RunError, cancel_run, create_run, resume_run
from training.snapshots import create_snapshot, verify_snapshot

REFUSED = OpenApiResponse(description="refused: the message says why")


def _not_allowed():
    return Response({"detail": "recorded by the workflow: it cannot be edited or deleted"},
                    status=status.HTTP_405_METHOD_NOT_ALLOWED)


class SnapshotSerializer(serializers.ModelSerializer):
    class Meta:
        model = DataSnapshot
        fields = ("id", "kind", "name", "config", "status", "directory", "row_ids", "row_count", "content_hash",
                  "stats", "error", "created_by", "created_at")
        read_only_fields = ("status", "directory", "row_ids", "row_count", "content_hash", "stats", "error",
                            "created_by", "created_at")


class TrainingRunSerializer(serializers.ModelSerializer):
    snapshot = serializers.PrimaryKeyRelatedField(queryset=DataSnapshot.objects.all(), required=False,
                                                  allow_null=True)
    base_model = serializers.PrimaryKeyRelatedField(queryset=ModelVersion.objects.all(), required=False,
                                                    allow_null=True)

    class Meta:
        model = TrainingRun
        fields = ("id", "stage", "snapshot", "base_model", "config", "status", "progress", "metrics", "directory",
                  "checkpoint", "error", "cancel_requested", "attempts", "produced_model", "created_by",
                  "created_at", "started_at", "finished_at")
        read_only_fields = ("status", "progress", "metrics", "directory", "checkpoint", "error", "cancel_requested",
                            "attempts", "produced_model", "created_by", "created_at", "started_at", "finished_at")


def _refused(error, code=status.HTTP_400_BAD_REQUEST):
    return Response({"detail": str(error)}, status=code)


_SnapshotBase = role_viewset(DataSnapshot, read_roles=(MANAGER, ADMIN), write_roles=(MANAGER, ADMIN),
                             serializer=SnapshotSerializer, filter_fields=("kind", "status"))


class DataSnapshotViewSet(_SnapshotBase):
    """Pool snapshots (exports for training). Filters: kind, status. POST exports one now."""

    @extend_schema(responses={201: SnapshotSerializer, 400: REFUSED})
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            snapshot = create_snapshot(data["kind"], data.get("config") or {}, user=request.user,
                                       name=data.get("name", ""))
        except ValueError as error:
            return _refused(error)
        return Response(self.get_serializer(snapshot).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        return _not_allowed()

    def destroy(self, request, *args, **kwargs):
        return _not_allowed()

    @extend_schema(request=None, responses={200: OpenApiResponse(description="{problems: [...]}")})
    @action(detail=True, methods=["post"])
    def verify(self, request, pk=None):
        """Recompute the snapshot's hashes from its files: [] when it is intact."""
        return Response({"problems": verify_snapshot(self.get_object())})


_TrainingRunBase = role_viewset(
    TrainingRun, read_roles=(MANAGER, ADMIN), write_roles=(MANAGER, ADMIN), filter_fields=("stage", "status"),
    serializer=TrainingRunSerializer)


class TrainingRunViewSet(_TrainingRunBase):
    """Training runs. Filters: stage, status. POST launches one on the training queue."""

    @extend_schema(responses={201: TrainingRunSerializer, 400: REFUSED})
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            run = create_run(data["stage"], data.get("config") or {}, user=request.user,
                             snapshot=data.get("snapshot"), base_model=data.get("base_model"))
        except (ConfigError, RunError) as error:
            return _refused(error)
        return Response(self.get_serializer(run).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        return _not_allowed()

    def destroy(self, request, *args, **kwargs):
        return _not_allowed()

    @extend_schema(request=None, responses={200: TrainingRunSerializer, 409: REFUSED})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        try:
            run = cancel_run(self.get_object())
        except RunError as error:
            return _refused(error, status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(run).data)

    @extend_schema(request=None, responses={200: TrainingRunSerializer, 409: REFUSED})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        try:
            run = resume_run(self.get_object())
        except RunError as error:
            return _refused(error, status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(run).data)


def register(router):
    router.register("training-runs", TrainingRunViewSet, basename="training-runs")
    router.register("snapshots", DataSnapshotViewSet, basename="snapshots")
