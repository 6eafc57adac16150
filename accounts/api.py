"""DRF glue shared by every package's API: role-checked, object-scoped viewsets built from a model."""
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import connection
from django.db.models import BooleanField, ForeignKey, IntegerField
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError

from accounts.roles import ROLES


def model_serializer(model, fields="__all__", read_only=()):
    meta = type("Meta", (), {"model": model, "fields": fields, "read_only_fields": read_only})
    return type(f"{model.__name__}Serializer", (serializers.ModelSerializer,), {"Meta": meta})


def filter_value(model, name, raw):
    """A query-string filter value as the field's Python value; a bad one is a 400 that says why."""
    field = model._meta.get_field(name)
    target = field.target_field if isinstance(field, ForeignKey) else field
    if "\x00" in raw:
        raise ValidationError({name: "contains a NUL character"})
    try:
        value = target.to_python(raw)
    except DjangoValidationError as error:
        raise ValidationError({name: error.messages})
    if isinstance(target, IntegerField):
        lowest, highest = connection.ops.integer_field_range(target.get_internal_type())
        if not (lowest is None or lowest <= value) or not (highest is None or value <= highest):
            raise ValidationError({name: f"{raw} is out of range"})
    if field.choices and value not in {choice for choice, _ in field.flatchoices}:
        raise ValidationError({name: f"{raw!r} is not one of: "
                                     f"{', '.join(str(choice) for choice, _ in field.flatchoices)}"})
    return value


def filter_parameters(model, names):
    """The filters as documented query parameters, so the schema (and clients) know them."""
    parameters = []
    for name in names:
        field = model._meta.get_field(name)
        target = field.target_field if isinstance(field, ForeignKey) else field
        kind = int if isinstance(target, IntegerField) else bool if isinstance(target, BooleanField) else str
        choices = [choice for choice, _ in field.flatchoices] if field.choices else None
        parameters.append(OpenApiParameter(name, kind, enum=choices, description=f"only rows with this {name}"))
    return parameters


def role_viewset(model, read_roles=ROLES, write_roles=None, queryset=None, serializer=None,
                 filter_fields=(), ordering=None, visible=None):
    """A viewset: anyone with one of `read_roles` reads; `write_roles` may write (None: read-only).

    `visible(user, queryset)` narrows the rows to those the user may see (object-level scoping);
    every action, reads and writes alike, starts from it.
    """
    base = viewsets.ModelViewSet if write_roles else viewsets.ReadOnlyModelViewSet
    serializer = serializer or model_serializer(model)
    base_queryset = queryset if queryset is not None else model.objects.all()
    if ordering:
        base_queryset = base_queryset.order_by(*ordering)

    def get_queryset(self):
        qs = base_queryset.all()
        if visible is not None:
            qs = visible(self.request.user, qs)
        for field in filter_fields:
            raw = self.request.query_params.get(field)
            if raw not in (None, ""):
                qs = qs.filter(**{field: filter_value(model, field, raw)})
        return qs if qs.ordered else qs.order_by("pk")  # pages need a stable order

    attrs = {
        "serializer_class": serializer, "queryset": base_queryset, "get_queryset": get_queryset,
        "read_roles": tuple(read_roles), "write_roles": tuple(write_roles or ()),
        "__doc__": f"{model._meta.verbose_name_plural.capitalize()}. Filters: "
                   f"{', '.join(filter_fields) or 'none'}.",
    }
    viewset = type(f"{model.__name__}ViewSet", (base,), attrs)
    if filter_fields:
        viewset = extend_schema_view(list=extend_schema(parameters=filter_parameters(model, filter_fields)))(viewset)
    return viewset
