"""The model catalog: the labs (and which are Chinese labs) and the models the platform covers."""

from django.conf import settings
from django.db import models, transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone

from belvedir import ids

# Prices are integer micro-dollars per million tokens: $0.10 / M tokens is 100_000.
MICROS_PER_DOLLAR = 1_000_000


def _words(text: str) -> list[str]:
    return [word for word in text.replace(",", " ").lower().split() if word]


class Lab(models.Model):
    """A model maker, matched from a model id's `vendor/` prefix or its model name."""

    name = models.CharField(max_length=80, unique=True)
    slug = models.SlugField(max_length=40, unique=True)
    is_chinese = models.BooleanField(
        default=False, help_text="Projects must allow Chinese models to run its covered models."
    )
    vendor_prefixes = models.CharField(
        max_length=300,
        blank=True,
        help_text="The `vendor/` parts of model ids that are this lab's, comma-separated "
        "(qwen, alibaba).",
    )
    name_prefixes = models.CharField(
        max_length=300,
        blank=True,
        help_text="How the lab's bare model names start, comma-separated (qwen, qwq); "
        "the longest matching prefix of any lab wins.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def vendors(self) -> list[str]:
        return _words(self.vendor_prefixes)

    @property
    def names(self) -> list[str]:
        return _words(self.name_prefixes)


class CoveredModel(models.Model):
    """A model the platform pays for when a run leaves its key blank (through the router)."""

    model_id = models.CharField(
        max_length=200, unique=True, help_text="As the upstream names it: qwen/qwen3-32b."
    )
    display_name = models.CharField(max_length=120)
    lab = models.ForeignKey(Lab, on_delete=models.PROTECT, related_name="covered_models")
    input_price_micros = models.BigIntegerField(
        help_text="Micro-dollars per million input tokens ($0.10 is 100000)."
    )
    output_price_micros = models.BigIntegerField(
        help_text="Micro-dollars per million output tokens ($0.30 is 300000)."
    )
    max_output_tokens = models.PositiveIntegerField(default=8192)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["model_id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(input_price_micros__gte=0, output_price_micros__gte=0),
                name="covered_model_prices_not_negative",
            ),
            models.CheckConstraint(
                condition=models.Q(max_output_tokens__gte=1),
                name="covered_model_max_output_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.model_id


def fine_tuned_model_id() -> str:
    return ids.make_id("ftm")


def adapter_upload_to(instance: "FineTunedModel", filename: str) -> str:
    """Where an adapter zip is stored (through the default storage): one folder per project."""
    return f"adapters/{instance.project_id}/{instance.pk}.zip"


class FineTunedModel(models.Model):
    """A LoRA adapter on a Hugging Face base model, benchmarked from the Models page."""

    id = models.CharField(
        primary_key=True, max_length=32, default=fine_tuned_model_id, editable=False
    )
    project = models.ForeignKey(
        "belvedir.Project", on_delete=models.CASCADE, related_name="fine_tuned_models"
    )
    name = models.CharField(
        max_length=120,
        help_text="The model's label: the sandbox's MODEL_LABEL, recorded as results.model.",
    )
    base_model = models.CharField(
        max_length=200, help_text="The base model's Hugging Face id (meta-llama/Llama-3.1-8B)."
    )
    adapter = models.FileField(upload_to=adapter_upload_to, max_length=300)
    adapter_size = models.BigIntegerField(default=0)
    gated = models.BooleanField(
        default=False,
        help_text="The base model needs a Hugging Face token: runs get the organization's as "
        "HF_TOKEN.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "fine-tuned model"
        constraints = [
            models.UniqueConstraint(
                fields=["project", "name"], name="fine_tuned_model_name_unique_in_project"
            ),
        ]

    def __str__(self) -> str:
        return self.name


@receiver(post_delete, sender=FineTunedModel, dispatch_uid="fine_tuned_model_adapter_file")
def _adapter_file_delete(sender, instance: FineTunedModel, **kwargs) -> None:
    """A deleted model's adapter zip leaves storage once the delete commits, however the row
    went: fine_tuned_model_delete, or a cascade from its project or organization (admin)."""
    storage, path = instance.adapter.storage, instance.adapter.name
    if path:
        transaction.on_commit(lambda: storage.delete(path))


class HuggingFaceToken(models.Model):
    """An organization's Hugging Face token (gated base models), encrypted; never shown again."""

    organization = models.OneToOneField(
        "belvedir.Organization", on_delete=models.CASCADE, related_name="hugging_face_token"
    )
    token_encrypted = models.TextField()
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "Hugging Face token"

    def __str__(self) -> str:
        return f"Hugging Face token of {self.organization_id}"
