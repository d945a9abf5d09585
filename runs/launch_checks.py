"""What a launch checks before anything is written (runs.services.run_launch calls these):
the repo answers, a sandbox engine with isolation in place (or a ready worker host), the
attempts and grading, a GPU type some worker serves, a fine-tuned model a GPU harness can
serve."""

from django.conf import settings

from belvedir import git
from belvedir.errors import Invalid, Unavailable
from belvedir.gpu_host import gpu_require
from belvedir.isolation import isolation_require
from belvedir.models import Project
from belvedir.sandbox_config import get_backend
from harnesses import drivers, policy
from harnesses.models import DEFAULT_GPU_TYPE, Compute, Harness
from models_registry.models import FineTunedModel
from models_registry.selectors import hf_token
from runs import gpu, hosts
from runs.models import MAX_ATTEMPTS, Grading
from sandboxes.base import SandboxError


def repo_check(*, repo_url: str, ref: str = "") -> None:
    """Refuse a repo that does not answer (404, no access, unknown host) or a missing ref."""
    # Checked again at launch: the harness may predate the policy, a changed file root, or
    # its host may resolve to an internal address now.
    try:
        policy.validate_repo_url(repo_url)
    except Invalid as exc:
        raise Invalid(
            f"The harness's {exc.message} Change the harness's repo URL.",
            field="harness",
            code="repo",
        ) from None
    try:
        source = drivers.clone_source(repo_url)  # a served driver: the local bare copy
        listing = git.ls_remote(source, ref, timeout=settings.BELVEDIR_GIT_TIMEOUT)
    except drivers.DriverError as exc:
        raise Invalid(f"The platform's driver is unavailable: {exc}.", field="harness") from None
    except git.GitError as exc:
        raise Invalid(str(exc), field="harness", code="repo") from None
    if ref and not git.is_commit(ref) and not listing.strip():
        raise Invalid(
            f"The repo {git.without_credentials(repo_url)} has no branch or tag {ref!r}.",
            field="harness",
            code="repo",
        )


def sandbox_check() -> None:
    """Refuse a launch while the sandbox engine does not answer (before anything is counted)."""
    try:
        get_backend().ping()
    except SandboxError as exc:
        raise Unavailable(
            "Runs cannot start right now: the sandbox engine is not answering. "
            "Try again in a few minutes.",
            retry_after=60,
        ) from exc


def launch_ready() -> None:
    """Refuse a launch no worker can run: this host's engine must answer with isolation in
    place, or (a web host with no engine of its own) some worker host must be ready."""
    try:
        sandbox_check()
        isolation_require()
    except Unavailable:
        if not hosts.hosts_ready():
            raise


def check_launch_input(*, harness: Harness, attempts, grading: str) -> None:
    if (
        isinstance(attempts, bool)
        or not isinstance(attempts, int)
        or not 1 <= attempts <= MAX_ATTEMPTS
    ):
        raise Invalid(
            f"attempts must be a whole number from 1 to {MAX_ATTEMPTS}.", field="attempts"
        )
    if grading not in Grading.values:
        raise Invalid("grading must be pass@1, pass@k or mean.", field="grading")
    if harness.compute == Compute.GPU:
        gpu_type_check(harness.gpu_type or DEFAULT_GPU_TYPE)


def gpu_type_check(gpu_type: str) -> None:
    """Refuse a GPU run of a type no worker serves (BELVEDIR_GPU_TYPES), or whose sandboxes
    this host cannot start (Unavailable naming what is missing: belvedir.gpu_host)."""
    served = gpu.gpu_types_served()
    if gpu_type not in served:
        raise Invalid(
            f"This platform has no GPU workers of type {gpu_type} "
            f"(GPU types served: {', '.join(served) or 'none'}), so this harness cannot run "
            f"here; switch it to CPU{' or to a GPU type served' if served else ''}.",
            field="harness",
            code="gpu",
        )
    gpu_require(gpu_type)


FINE_TUNED_NEEDS_GPU = "fine-tuned models need a GPU harness that serves the model in the sandbox"


def check_fine_tuned(
    *, project: Project, harness: Harness, fine_tuned_model: FineTunedModel
) -> None:
    if fine_tuned_model.project_id != project.pk or harness.project_id != project.pk:
        raise Invalid("The model and the harness must be of the same project.", field="harness")
    if harness.compute != Compute.GPU:
        raise Invalid(
            f"{harness.name} is a CPU harness: {FINE_TUNED_NEEDS_GPU}.",
            field="harness",
            code="gpu_required",
        )
    if fine_tuned_model.gated and not hf_token(organization=project.organization):
        raise Invalid(
            f"The base model {fine_tuned_model.base_model} is gated: an owner or admin must set "
            "the organization's Hugging Face token (Organization settings) first.",
            field="model",
            code="hf_token_missing",
        )
