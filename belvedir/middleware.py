"""Refuse what no view can store: a NUL character in the path or the query string."""

from django.http import JsonResponse


class RejectNulMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        query_has_nul = any(
            "\x00" in key or "\x00" in value
            for key, values in request.GET.lists()
            for value in values
        )
        if "\x00" in request.path or query_has_nul:
            return JsonResponse({"detail": "The URL contains a NUL character."}, status=400)
        return self.get_response(request)
