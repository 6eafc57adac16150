"""{% load query_review %}: whether the signed-in person may use the query review page (the nav link)."""
from django import template

from annotation.review import may_review_queries as _may_review_queries

register = template.Library()


@register.filter
def may_review_queries(user) -> bool:
    return _may_review_queries(user)
