"""A path the router does not serve, passed through to the upstream when the operator allows
it (BELVEDIR_ROUTER_PASSTHROUGH): for a running covered run's key only, with the operator's
key, untraced and not charged (meant for calls that cost nothing, such as Anthropic's
`messages/count_tokens`), and only the calls BELVEDIR_ROUTER_PASSTHROUGH_CALLS lists. The path stays under the upstream's base (no `..`, nothing but
plain path characters), the caller's headers are not passed on but for the content type and
Anthropic's version, redirects are not followed, and an upstream error comes back
OpenAI-style."""

import re

import httpx
from django.conf import settings
from django.http import StreamingHttpResponse

from router.calls import error_response, upstream_error
from router.targets import covered_target
from runs.models import Run, Status

_PLAIN_PATH = re.compile(r"[A-Za-z0-9_-]+(?:[./][A-Za-z0-9_-]+)*")
PASSED_HEADERS = ("content-type", "accept", "anthropic-version", "anthropic-beta")


def plain_path(rest: str) -> bool:
    """A path that names something under the upstream's base and nothing above it."""
    return bool(_PLAIN_PATH.fullmatch(rest)) and ".." not in rest


async def forward(request, rest: str, run: Run, raw: bytes | None):
    if (request.method, rest) not in settings.BELVEDIR_ROUTER_PASSTHROUGH_CALLS:
        message = f"The router does not pass {request.method} /api/v1/{rest} through."
        return error_response(404, message, type="invalid_request_error", code="unknown_url")
    if not plain_path(rest):
        message = "The path is not one the router passes through."
        return error_response(400, message, type="invalid_request_error", code="invalid_path")
    if raw is None:
        return error_response(413, "The request body is too large.", type="invalid_request_error")
    if run.status != Status.RUNNING or not run.covered:
        message = "Only a running covered run's key passes calls through."
        return error_response(403, message, type="invalid_request_error", code="run_not_covered")
    target = covered_target()
    passed = {name: request.headers[name] for name in PASSED_HEADERS if request.headers.get(name)}
    url, headers = target.url(rest), {**passed, **target.headers()}
    query = request.META.get("QUERY_STRING", "")
    http = target.client()
    outgoing = http.build_request(
        request.method, url + (f"?{query}" if query else ""), content=raw, headers=headers
    )
    try:
        response = await http.send(outgoing, stream=True, follow_redirects=False)
    except httpx.HTTPError as exc:
        message = f"The upstream could not be reached: {type(exc).__name__}."
        return error_response(502, message, type="upstream_error")
    if response.status_code >= 300:
        content = await response.aread()
        await response.aclose()
        return upstream_error(max(response.status_code, 400), content)[0]

    async def body():
        try:
            async for chunk in response.aiter_raw():
                yield chunk
        finally:
            await response.aclose()

    return StreamingHttpResponse(
        body(),
        status=response.status_code,
        content_type=response.headers.get("content-type", "application/json"),
    )
