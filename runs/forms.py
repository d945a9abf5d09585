from django import forms

from runs.models import MAX_ATTEMPTS, Grading


class LaunchForm(forms.Form):
    """The New benchmark dialog; `harness_choices` adds a harness picker (My Benchmarks)."""

    def __init__(self, *args, harness_choices=None, **kwargs):
        super().__init__(*args, **kwargs)
        if harness_choices is not None:
            self.fields = {"harness": forms.ChoiceField(choices=harness_choices), **self.fields}

    attempts = forms.IntegerField(
        label="Attempts per task", min_value=1, max_value=MAX_ATTEMPTS, initial=1
    )
    grading = forms.ChoiceField(choices=Grading.choices, initial=Grading.PASS_AT_1)
    model = forms.CharField(label="MODEL", required=False, max_length=200)
    model_api_base = forms.CharField(label="MODEL_API_BASE", required=False, max_length=500)
    model_api_key = forms.CharField(
        label="MODEL_API_KEY", required=False, widget=forms.PasswordInput, max_length=2000
    )
    judge_model = forms.CharField(label="JUDGE_MODEL", required=False, max_length=200)
    judge_api_base = forms.CharField(label="JUDGE_API_BASE", required=False, max_length=500)
    judge_api_key = forms.CharField(
        label="JUDGE_API_KEY", required=False, widget=forms.PasswordInput, max_length=2000
    )
