"""Forms for the suite editor and the launch panel. Validation of the YAML itself lives in the engine."""

from django import forms
from django.core.validators import ProhibitNullCharactersValidator

from runs.services import MAX_CONCURRENCY


def normalise_newlines(text: str) -> str:
    # Browsers submit textareas with CRLF line endings; store what the user sees, so that saving unchanged
    # text is recognised as unchanged and line numbers in problems match the editor.
    return text.replace("\r\n", "\n").replace("\r", "\n")


class SuiteSourceForm(forms.Form):
    # strip=False: leading/trailing whitespace is part of the file the user wrote. Not required: an empty
    # suite is reported by the engine, located, like every other problem.
    source = forms.CharField(strip=False, required=False, widget=forms.Textarea)
    note = forms.CharField(max_length=200, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A NUL is reported by the engine, with its line and column, like every other character YAML refuses.
        field = self.fields["source"]
        field.validators = [v for v in field.validators if not isinstance(v, ProhibitNullCharactersValidator)]

    def clean_source(self) -> str:
        return normalise_newlines(self.cleaned_data["source"])


class LaunchForm(forms.Form):
    model = forms.CharField(max_length=200, required=False, strip=True)
    concurrency = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, initial=10)
    version = forms.TypedChoiceField(coerce=int, required=False, empty_value=None)

    def __init__(self, *args, versions: list[int] | tuple[int, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["version"].choices = [(number, f"v{number}") for number in versions]
