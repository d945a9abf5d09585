"""The one pagination of every list API (limit/offset), HackSoft's `get_paginated_response`.

Its own module: DRF imports the pagination class from settings while it loads, before
drf-spectacular can be imported.
"""

from django.db.models import QuerySet
from rest_framework import pagination, serializers
from rest_framework.response import Response
from rest_framework.views import APIView


class Pagination(pagination.LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


def get_paginated_response(
    *, view: APIView, queryset: QuerySet, serializer_class: type[serializers.Serializer]
) -> Response:
    """One page of `queryset` (`limit`/`offset`) as `{count, next, previous, results}`.

    Every list API answers through this; the view's `pagination_class` is also what the
    schema documents.
    """
    paginator = view.pagination_class()
    rows = paginator.paginate_queryset(queryset, view.request, view=view)
    return paginator.get_paginated_response(serializer_class(rows, many=True).data)


class ListAPIView(APIView):
    """An APIView whose GET lists: paginated by `get_paginated_response`."""

    pagination_class = Pagination
