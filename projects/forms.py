"""The forms of the projects pages."""

from django import forms
from django.contrib.auth import get_user_model

from .roles import Role


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True)


class AddMemberForm(forms.Form):
    username = forms.CharField(max_length=150, strip=True)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)

    def clean_username(self):
        username = self.cleaned_data["username"]
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise forms.ValidationError(
                f"No user is called “{username}”: they sign in once, or an admin adds them."
            )
        self.user = user
        return username


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)
