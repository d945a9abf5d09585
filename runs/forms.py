from django import forms

from runs.models import MAX_ATTEMPTS, Grading


class LaunchForm(forms.Form):
    """The New benchmark dialog; `harness_choices` adds a harness picker (My Benchmarks),
    `models_used` the model ids launched before in the project (offered as a datalist)."""

    MODELS_DATALIST = "models-used"

    def __init__(self, *args, harness_choices=None, models_used=(), **kwargs):
        super().__init__(*args, **kwargs)
        if harness_choices is not None:
            self.fields = {"harness": forms.ChoiceField(choices=harness_choices), **self.fields}
        self.models_used = list(models_used)
        if self.models_used:
            self.fields["model"].widget.attrs["list"] = self.MODELS_DATALIST

    attempts = forms.IntegerField(
        label="Attempts per task", min_value=1, max_value=MAX_ATTEMPTS, initial=1
    )
    grading = forms.ChoiceField(choices=Grading.choices, initial=Grading.PASS_AT_1)
    model = forms.CharField(
        label="MODEL",
        required=False,
        widget=forms.TextInput(
            attrs={"placeholder": "e.g. openai/gpt-4.1-mini or anthropic/claude-sonnet-5"}
        ),
        max_length=200,
    )
    model_api_base = forms.CharField(
        label="MODEL_API_BASE",
        required=False,
        widget=forms.TextInput(
            attrs={"placeholder": "blank: inferred from the model id (OpenRouter for vendor/model)"}
        ),
        max_length=500,
    )
    model_api_key = forms.CharField(
        label="MODEL_API_KEY",
        required=False,
        widget=forms.PasswordInput(
            attrs={"placeholder": "blank: the platform covers supported open models"}
        ),
        max_length=2000,
    )
    judge_model = forms.CharField(
        label="JUDGE_MODEL",
        required=False,
        widget=forms.TextInput(
            attrs={"placeholder": "e.g. openai/gpt-4.1-mini (LLM-judged harnesses)"}
        ),
        max_length=200,
    )
    judge_api_base = forms.CharField(
        label="JUDGE_API_BASE",
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "blank: inferred from the judge model id"}),
        max_length=500,
    )
    judge_api_key = forms.CharField(
        label="JUDGE_API_KEY",
        required=False,
        widget=forms.PasswordInput(attrs={"placeholder": "key for the judge's endpoint"}),
        max_length=2000,
    )


class ModelLaunchForm(forms.Form):
    """Run benchmark on the Models page: one of the project's GPU harnesses, attempts, grading."""

    def __init__(self, *args, harness_choices, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["harness"].choices = harness_choices

    harness = forms.ChoiceField(label="GPU harness", choices=())
    attempts = forms.IntegerField(
        label="Attempts per task", min_value=1, max_value=MAX_ATTEMPTS, initial=1
    )
    grading = forms.ChoiceField(choices=Grading.choices, initial=Grading.PASS_AT_1)
