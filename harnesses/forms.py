from django import forms

from belvedir.text import size_text
from harnesses import tasks_format
from harnesses.models import DEFAULT_GPU_TYPE, GPU_TYPES


def env_to_text(env: dict) -> str:
    return "\n".join(f"{k}={v}" for k, v in (env or {}).items())


def env_from_text(text: str) -> dict:
    """KEY=VALUE lines; blank lines and # comments skipped. Keys are checked by the policy."""
    env = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "=" not in line:
            raise forms.ValidationError(f"Line {number}: write KEY=VALUE.")
        key, value = line.split("=", 1)
        env[key.strip()] = value
    return env


class HarnessForm(forms.Form):
    name = forms.CharField(max_length=120)
    repo_url = forms.CharField(label="Git repo URL", max_length=500)
    ref = forms.CharField(label="Ref (branch, tag or commit)", required=False, max_length=200)
    install_command = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    run_command = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    env = forms.CharField(
        label="Env vars (KEY=VALUE, one per line)",
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        help_text="Values of names ending in _KEY, _TOKEN or _SECRET, or holding PASSWORD, are "
        "stored encrypted and shown as ••••: leave •••• to keep one, or type a new value.",
    )
    compute = forms.ChoiceField(
        choices=[("cpu", "CPU"), ("gpu", "GPU")],
        initial="cpu",
        help_text=(
            "CPU (default) for harnesses whose agent calls a hosted model API. GPU for harnesses "
            "that serve the model inside the sandbox (vLLM, Ollama): the sandbox gets an NVIDIA "
            "GPU, and launches go to a worker that has one."
        ),
    )
    gpu_type = forms.ChoiceField(
        label=f"GPU type (GPU harnesses; {DEFAULT_GPU_TYPE} by default)",
        choices=[("", "—")] + [(g, g) for g in GPU_TYPES],
        required=False,
    )
    tasks = forms.CharField(
        label="Tasks",
        widget=forms.Textarea(attrs={"rows": 6}),
        required=False,
        help_text=(
            "Optional: the task list your harness runs (for example one JSON task per line). "
            "The sandbox gets it as a file at $BELVEDIR_TASKS_FILE; suites that bring their own "
            f"tasks leave it empty. Up to {size_text(tasks_format.MAX_BYTES, iec=False)}."
        ),
    )
    preset = forms.CharField(widget=forms.HiddenInput, required=False)

    def clean_env(self):
        return env_from_text(self.cleaned_data.get("env", ""))

    @classmethod
    def initial_from(cls, values: dict) -> dict:
        return {**values, "env": env_to_text(values.get("env") or {})}
