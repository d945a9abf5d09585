"""`GET /api/v1/adapters/{run_id}/{token}`: a running run's sandbox downloads its fine-tuned
model's adapter zip, with no login: the signed token (models_registry.signing) is the grant.

403 for a token that is not signed by us, made for another run or model, past the run's time
cap, or once the run is no longer running. The zip is streamed from storage.
"""

import time

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from belvedir.errors import Forbidden, NotFound
from belvedir.files import StreamedFileResponse
from belvedir.schema import errors
from models_registry.signing import adapter_grant
from runs.models import Run, Status


class AdapterDownloadView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="adapters_download",
        summary="Download a fine-tuned model's adapter zip: ADAPTER_URL, from the run's sandbox.",
        auth=[],
        responses={
            (200, "application/zip"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The LoRA adapter zip."
            ),
            **errors(403, 404),
        },
    )
    def get(self, request, run_id: str, token: str):
        grant = adapter_grant(token)
        if grant is None or grant.run_id != run_id:
            raise Forbidden("This adapter link is not valid for this run.")
        if time.time() > grant.expires:
            raise Forbidden("This adapter link has expired: the run's time cap has ended.")
        run = (
            Run.objects.select_related("fine_tuned_model")
            .filter(pk=run_id, fine_tuned_model_id=grant.model_id)
            .first()
        )
        if run is None:
            raise Forbidden("This adapter link is not valid for this run.")
        if run.status != Status.RUNNING:
            raise Forbidden(f"This adapter link has expired: the run has ended ({run.status}).")
        model = run.fine_tuned_model
        try:
            handle = model.adapter.open("rb")
        except FileNotFoundError:
            raise NotFound("The adapter file is missing from storage.") from None
        return StreamedFileResponse(
            handle, as_attachment=True, filename=f"{model.pk}.zip", content_type="application/zip"
        )
