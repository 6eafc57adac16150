"""DRF glue shared by every package's API: role-checked viewsets built from a model."""
from rest_framework import serializers, viewsets

from accounts.roles import ROLES


def model_serializer(model, fields="__all__", read_only=()):
    meta = type("Meta", (), {"model": model, "fields": fields, "read_only_fields": read_only})
    return type(f"{model.__name__}Serializer", (serializers.ModelSerializer,), {"Meta": meta})


def role_viewset(model, read_roles=ROLES, write_roles=None, queryset=None, serializer=None,
                 filter_fields=(), ordering=None):
    """A viewset: anyone with one of `read_roles` reads; `write_roles` may write (None: read-only)."""
    base = viewsets.ModelViewSet if write_roles else viewsets.ReadOnlyModelViewSet
    serializer = serializer or model_serializer(model)
    base_queryset = queryset if queryset is not None else model.objects.all()
    if ordering:
        base_queryset = base_queryset.order_by(*ordering)

    def get_queryset(self):
        qs = base_queryset.all()
        for field in filter_fields:
            value = self.request.query_params.get(field)
            if value not in (None, ""):
                qs = qs.filter(**{field: value})
        return qs

    attrs = {
        "serializer_class": serializer, "queryset": base_queryset, "get_queryset": get_queryset,
        "read_roles": tuple(read_roles), "write_roles": tuple(write_roles or ()),
        "__doc__": f"{model._meta.verbose_name_plural.capitalize()}. Filters: "
                   f"{', '.join(filter_fields) or 'none'}.",
    }
    return type(f"{model.__name__}ViewSet", (base,), attrs)
