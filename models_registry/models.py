"""The model catalog: the labs (and which are Chinese labs) and the models the platform covers."""

from django.db import models

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
