from django import forms
from django.contrib.auth.forms import AuthenticationForm


class SignupForm(forms.Form):
    email = forms.EmailField()
    password = forms.CharField(widget=forms.PasswordInput, min_length=8)
    organization = forms.CharField(max_length=120, label="Organization name")


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=120)


class InviteForm(forms.Form):
    email = forms.EmailField(
        max_length=150, widget=forms.EmailInput(attrs={"placeholder": "colleague@example.com"})
    )
    role = forms.ChoiceField(
        choices=[("member", "Member"), ("admin", "Admin"), ("readonly", "Read-only member")]
    )


class InvitationSignupForm(forms.Form):
    """Sign-up through an invitation link: the email is the invited one."""

    password = forms.CharField(widget=forms.PasswordInput, min_length=8)


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=120)


class EmailLoginForm(AuthenticationForm):
    """Log in with the email address in any case; accounts are stored lowercased."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Please enter a correct email and password. The password is "
        "case-sensitive.",
    }

    def clean_username(self):
        return (self.cleaned_data.get("username") or "").strip().lower()
