"""Adjudication over the API: the records are read-only; claim, release, decide and next are the
workflow's own actions, through the same services (annotation.adjudication) as the pages."""
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.api import model_serializer, role_viewset
from accounts.roles import ADJUDICATOR, MANAGER
from annotation import adjudication
from flywheel import access
from flywheel.models import Adjudication, Trajectory

AdjudicationSerializer = model_serializer(Adjudication)


class TrajectoryChoice(serializers.Serializer):
    trajectory = serializers.PrimaryKeyRelatedField(queryset=Trajectory.objects.all())


class DecisionSerializer(TrajectoryChoice):
    decision = serializers.ChoiceField(choices=Adjudication.Decision.choices)
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


REFUSED = OpenApiResponse(description="someone else holds the claim, or it left the queue")

_AdjudicationBase = role_viewset(
    Adjudication, read_roles=(ADJUDICATOR, MANAGER),
    queryset=Adjudication.objects.select_related("adjudicator"), serializer=AdjudicationSerializer,
    filter_fields=("trajectory", "decision"), visible=access.adjudications_visible_to)


class AdjudicationViewSet(_AdjudicationBase):
    """Adjudications of Undetermined trajectories (§2.4.2). Filters: trajectory, decision.

    Adjudicators see their own claims and decisions and the claims on the open queue."""

    write_roles = (ADJUDICATOR,)  # who may take the actions below; the records themselves are read-only

    def _chosen(self, request, serializer_class=TrajectoryChoice):
        chosen = serializer_class(data=request.data)
        chosen.is_valid(raise_exception=True)
        return chosen.validated_data

    def _answer(self, record, code=status.HTTP_200_OK):
        return Response(AdjudicationSerializer(record, context={"request": self.request}).data, status=code)

    @extend_schema(request=TrajectoryChoice, responses={200: AdjudicationSerializer, 409: REFUSED})
    @action(detail=False, methods=["post"])
    def claim(self, request):
        """Lock a waiting trajectory for yourself (or extend your lock); it frees itself after a while."""
        trajectory = self._chosen(request)["trajectory"]
        try:
            return self._answer(adjudication.claim(trajectory.pk, request.user))
        except adjudication.ClaimRefused as refusal:
            return Response({"detail": str(refusal)}, status=status.HTTP_409_CONFLICT)

    @extend_schema(request=TrajectoryChoice, responses={204: None})
    @action(detail=False, methods=["post"])
    def release(self, request):
        """Give back your open claim on a trajectory."""
        adjudication.release(self._chosen(request)["trajectory"].pk, request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=DecisionSerializer, responses={200: AdjudicationSerializer, 409: REFUSED})
    @action(detail=False, methods=["post"])
    def decide(self, request):
        """Record a decision and route the trajectory: correct → SFT pool, wrong → ECDM,
        environment → the Env_ERROR branch."""
        chosen = self._chosen(request, DecisionSerializer)
        try:
            decided = adjudication.decide(chosen["trajectory"].pk, request.user, chosen["decision"], chosen["note"])
        except adjudication.ClaimRefused as refusal:
            return Response({"detail": str(refusal)}, status=status.HTTP_409_CONFLICT)
        except ValueError as error:
            return Response({"decision": [str(error)]}, status=status.HTTP_400_BAD_REQUEST)
        return self._answer(decided)

    @extend_schema(request=None, responses={200: AdjudicationSerializer, 204: OpenApiResponse(
        description="nothing is waiting")})
    @action(detail=False, methods=["post"], url_path="next")
    def take_next(self, request):
        """Your open claim, else the oldest unclaimed trajectory of the queue, claimed for you."""
        claimed = adjudication.next_for(request.user)
        return self._answer(claimed) if claimed else Response(status=status.HTTP_204_NO_CONTENT)


def register(router):
    router.register("adjudications", AdjudicationViewSet, basename="adjudications")
