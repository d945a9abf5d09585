from django import forms


class FineTunedModelForm(forms.Form):
    name = forms.CharField(
        max_length=120,
        help_text="The label runs record as results.model (MODEL_LABEL in the sandbox).",
        widget=forms.TextInput(attrs={"placeholder": "llama-3.1-8b-support-lora-v2"}),
    )
    base_model = forms.CharField(
        label="Base model",
        max_length=200,
        help_text="The Hugging Face id of the base model (MODEL in the sandbox).",
        widget=forms.TextInput(attrs={"placeholder": "meta-llama/Llama-3.1-8B-Instruct"}),
    )
    gated = forms.BooleanField(
        required=False,
        label="Gated base model",
        help_text="Runs get the organization's Hugging Face token as HF_TOKEN.",
    )
    adapter = forms.FileField(
        label="LoRA adapter zip",
        help_text="A zip of the adapter folder: adapter_config.json and "
        "adapter_model.safetensors (or adapter_model.bin).",
        widget=forms.ClearableFileInput(attrs={"accept": ".zip,application/zip"}),
    )


class HuggingFaceTokenForm(forms.Form):
    token = forms.CharField(
        label="Hugging Face token",
        max_length=300,
        widget=forms.PasswordInput(attrs={"placeholder": "hf_…", "autocomplete": "off"}),
        help_text="A read token with access to your gated base models. Stored encrypted; "
        "never shown again.",
    )
