"""Benchmarks and evaluation runs over the API, through the same services as the pages.

Managers create versions (the quota table is checked), derive them by stated shifts, freeze them;
a frozen version refuses every change (409). An evaluation run is created by launching it
(benchmark.infer.launch_evaluation: a refusal is a 400 that says why); its status, scores and
results are what inference and the judges wrote, read-only. Experts (adjudicators, managers) score
split results through the expert-verdict action (benchmark.judges.record_expert_verdict).
"""
from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.api import model_serializer, role_viewset
from accounts.roles import ADJUDICATOR, ADMIN, MANAGER
from benchmark import versions
from benchmark.infer import EvaluationRefused, cancel_evaluation, launch_evaluation, resume_evaluation
from benchmark.input_checks import InputError, infer_settings, name_and_version, shifts_from
from benchmark.judges import record_expert_verdict
from benchmark.models import Benchmark, EvalResult, EvalRun, FrozenBenchmark
from benchmark.rules.quotas import quota_problems
from flywheel.models import ModelVersion

REFUSED = OpenApiResponse(description="refused: the message says why")
FROZEN = OpenApiResponse(description="the version is frozen (or has evaluation runs): derive a new one")


def _refused(error, code=status.HTTP_400_BAD_REQUEST):
    return Response({"detail": str(error)}, status=code)


class BenchmarkSerializer(serializers.ModelSerializer):
    class Meta:
        model = Benchmark
        fields = ("id", "name", "version", "parent", "purpose", "origin", "quota_table", "evolution", "status",
                  "frozen", "frozen_at", "frozen_by", "content_hash", "created_by", "created_at")
        read_only_fields = ("parent", "origin", "evolution", "status", "frozen", "frozen_at", "frozen_by",
                            "content_hash", "created_by", "created_at")

    def validate_quota_table(self, table):
        problems = quota_problems(table)
        if problems:
            raise serializers.ValidationError(problems)
        return table

    def validate(self, data):
        try:
            name_and_version(data.get("name", getattr(self.instance, "name", "")),
                             data.get("version", getattr(self.instance, "version", "")))
        except InputError as error:
            raise serializers.ValidationError(str(error))
        return data


class DeriveSerializer(serializers.Serializer):
    version = serializers.CharField(max_length=40)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    purpose = serializers.CharField(required=False, allow_blank=True, default="")
    shifts = serializers.JSONField(help_text="{dimension: {value: ±share}}")

    def validate_shifts(self, shifts):
        try:
            return shifts_from(shifts)
        except InputError as error:
            raise serializers.ValidationError(str(error))


_BenchmarkBase = role_viewset(Benchmark, read_roles=(MANAGER,), write_roles=(MANAGER, ADMIN),
                              serializer=BenchmarkSerializer, filter_fields=("status", "frozen", "parent"))


class BenchmarkViewSet(_BenchmarkBase):
    """Benchmark versions (§4.2). Filters: status, frozen, parent.

    Create checks the quota table; a draft's name, version, purpose and quota table may change;
    a frozen version (or one with evaluation runs) is never changed or deleted: 409."""

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            benchmark = versions.create_version(data["name"].strip(), data["version"].strip(),
                                                data.get("quota_table") or {}, purpose=data.get("purpose", ""),
                                                user=request.user)
        except versions.VersionError as error:
            return _refused(error)
        return Response(self.get_serializer(benchmark).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        benchmark = self.get_object()
        if benchmark.frozen:
            return _refused(f"{benchmark} is frozen: it never changes; derive a new version "
                            "(POST /api/benchmarks/{id}/derive/)", status.HTTP_409_CONFLICT)
        return super().update(request, *args, **kwargs)

    def perform_update(self, serializer):
        with transaction.atomic():
            benchmark = serializer.save()
            versions.refresh_evolution(benchmark)

    def destroy(self, request, *args, **kwargs):
        benchmark = self.get_object()
        try:
            benchmark.delete()
        except FrozenBenchmark as error:
            return _refused(error, status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: BenchmarkSerializer, 400: REFUSED, 409: FROZEN})
    @action(detail=True, methods=["post"])
    def freeze(self, request, pk=None):
        """Freeze after review: every query approved or retired; from then on it never changes."""
        benchmark = self.get_object()
        try:
            benchmark = versions.freeze(benchmark, request.user)
        except FrozenBenchmark as error:
            return _refused(error, status.HTTP_409_CONFLICT)
        except versions.VersionError as error:
            return _refused(error)
        return Response(self.get_serializer(benchmark).data)

    @extend_schema(request=DeriveSerializer, responses={201: BenchmarkSerializer, 400: REFUSED})
    @action(detail=True, methods=["post"])
    def derive(self, request, pk=None):
        """A new draft from this version by stated quota shifts; its queries carry over as reviewed."""
        parent = self.get_object()
        chosen = DeriveSerializer(data=request.data)
        chosen.is_valid(raise_exception=True)
        data = chosen.validated_data
        try:
            name, version = name_and_version(data["name"] or parent.name, data["version"])
            child = versions.derive_version(parent, version, data["shifts"], user=request.user, name=name,
                                            purpose=data["purpose"])
        except (InputError, versions.VersionError) as error:
            return _refused(error)
        return Response(self.get_serializer(child).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={202: OpenApiResponse(description="generation started"), 409: FROZEN})
    @action(detail=True, methods=["post"])
    def generate(self, request, pk=None):
        """Generate queries against the quota in the benchmark worker."""
        benchmark = self.get_object()
        if benchmark.frozen:
            return _refused(f"{benchmark} is frozen: derive a new version to generate into", status.HTTP_409_CONFLICT)
        from benchmark.tasks import generate

        user_id = request.user.pk
        transaction.on_commit(lambda: generate.delay(benchmark.pk, user_id))
        return Response({"detail": f"generation against the quota of {benchmark} started"},
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={200: OpenApiResponse(description="quota vs realised")})
    @action(detail=True, methods=["get"])
    def composition(self, request, pk=None):
        """Quota vs realised: drift rows, deficits, missing must-include scenarios, apps over the cap."""
        return Response(versions.composition(self.get_object()))


EvalRunSerializer = model_serializer(EvalRun, read_only=[f.name for f in EvalRun._meta.get_fields()
                                                         if f.concrete and not f.auto_created] + ["trajectories"])


class LaunchSerializer(serializers.Serializer):
    benchmark = serializers.PrimaryKeyRelatedField(queryset=Benchmark.objects.all())
    model_version = serializers.PrimaryKeyRelatedField(queryset=ModelVersion.objects.all())
    split = serializers.ChoiceField(choices=["all", "open", "held_out"], default="all")
    config = serializers.JSONField(required=False, default=dict,
                                   help_text="evaluation settings: max_steps, timeout_s, screenshots_k, seed, "
                                             "phones, recollect_limit (everything else is pinned)")

    def validate_config(self, config):
        try:
            return infer_settings(config)
        except InputError as error:
            raise serializers.ValidationError(str(error))


_EvalRunBase = role_viewset(
    EvalRun, read_roles=(MANAGER,), write_roles=(MANAGER, ADMIN), filter_fields=("benchmark", "status"),
    queryset=EvalRun.objects.select_related("benchmark", "model_version"), serializer=EvalRunSerializer)


class EvalRunViewSet(_EvalRunBase):
    """Evaluation runs (§4.3). Filters: benchmark, status. Created by launching one; read-only after."""

    http_method_names = ["get", "post", "head", "options"]

    @extend_schema(request=LaunchSerializer, responses={201: EvalRunSerializer, 400: REFUSED})
    def create(self, request, *args, **kwargs):
        """Launch an evaluation of a frozen version: the config is pinned, the rollouts go to the phones."""
        chosen = LaunchSerializer(data=request.data)
        chosen.is_valid(raise_exception=True)
        data = chosen.validated_data
        try:
            evaluation = launch_evaluation(data["benchmark"], data["model_version"], data["split"], data["config"],
                                           user=request.user)
        except EvaluationRefused as error:
            return _refused(error)
        return Response(EvalRunSerializer(evaluation, context={"request": request}).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={202: OpenApiResponse(description="re-judging started"), 409: REFUSED})
    @action(detail=True, methods=["post"])
    def rejudge(self, request, pk=None):
        """Judge the run again from its stored rollouts with today's judges (expert verdicts kept)."""
        evaluation = self.get_object()
        if evaluation.status in (EvalRun.Status.QUEUED, EvalRun.Status.RUNNING, EvalRun.Status.JUDGING):
            return _refused(f"the run is {evaluation.get_status_display().lower()}: re-judge it once it has finished",
                            status.HTTP_409_CONFLICT)
        from benchmark.tasks import rejudge

        transaction.on_commit(lambda: rejudge.delay(evaluation.pk))
        return Response({"detail": f"re-judging eval #{evaluation.pk} (round {evaluation.judge_round + 1})"},
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={200: EvalRunSerializer, 409: REFUSED})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        evaluation = self.get_object()
        if evaluation.status not in (EvalRun.Status.QUEUED, EvalRun.Status.RUNNING, EvalRun.Status.PAUSED):
            return _refused(f"the run is {evaluation.get_status_display().lower()}", status.HTTP_409_CONFLICT)
        cancel_evaluation(evaluation)
        evaluation.refresh_from_db()
        return Response(EvalRunSerializer(evaluation, context={"request": request}).data)

    @extend_schema(request=None, responses={200: EvalRunSerializer, 409: REFUSED})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        evaluation = self.get_object()
        refused = resume_evaluation(evaluation)
        if refused:
            return _refused(refused, status.HTTP_409_CONFLICT)
        evaluation.refresh_from_db()
        return Response(EvalRunSerializer(evaluation, context={"request": request}).data)


EvalResultSerializer = model_serializer(EvalResult)


class VerdictSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["success", "failure"])
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


_EvalResultBase = role_viewset(
    EvalResult, read_roles=(MANAGER, ADJUDICATOR), serializer=EvalResultSerializer,
    queryset=EvalResult.objects.select_related("item"), filter_fields=("eval_run", "state", "superseded"),
    ordering=("eval_run", "item__position", "attempt", "pk"))


class EvalResultViewSet(_EvalResultBase):
    """Per-query results of evaluation runs: votes, verdict, outcome (read-only). Filters: eval_run,
    state, superseded. Results in state "split" wait for an expert verdict."""

    write_roles = (ADJUDICATOR, MANAGER)  # who may give an expert verdict; the records are read-only

    @extend_schema(request=VerdictSerializer, responses={200: EvalResultSerializer, 409: REFUSED})
    @action(detail=True, methods=["post"], url_path="expert-verdict")
    def expert_verdict(self, request, pk=None):
        """An expert scores a split (or overrides a judged) result; the run's SR follows."""
        result = self.get_object()
        chosen = VerdictSerializer(data=request.data)
        chosen.is_valid(raise_exception=True)
        try:
            result = record_expert_verdict(result, chosen.validated_data["outcome"], request.user,
                                           note=chosen.validated_data["note"])
        except ValueError as error:
            return _refused(error, status.HTTP_409_CONFLICT)
        return Response(EvalResultSerializer(result, context={"request": request}).data)


def register(router):
    router.register("benchmarks", BenchmarkViewSet, basename="benchmarks")
    router.register("eval-runs", EvalRunViewSet, basename="eval-runs")
    router.register("eval-results", EvalResultViewSet, basename="eval-results")
