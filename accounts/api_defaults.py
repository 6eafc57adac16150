"""The API's defaults (settings.REST_FRAMEWORK): page sizes and how errors answer.

Apart from accounts.api because DRF imports these while it builds its own views.
"""
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError, RestrictedError
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response


class ApiPagination(PageNumberPagination):
    """`?page=` and `?page_size=`, never more than `max_page_size` rows in one answer."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 500


def api_exception_handler(error, context):
    """DRF's handler, plus: a record other records still need → 409; a model's own check → 400."""
    if isinstance(error, ProtectedError | RestrictedError):
        return Response({"detail": f"still used by other records: {error.args[0]}"}, status=status.HTTP_409_CONFLICT)
    if isinstance(error, DjangoValidationError):
        error = ValidationError(error.message_dict if hasattr(error, "error_dict") else error.messages)
    from rest_framework.views import exception_handler

    return exception_handler(error, context)
