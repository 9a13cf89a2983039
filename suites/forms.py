"""Forms for the suite editor and the launch panel. Validation of the YAML itself lives in the engine."""

from django import forms
from django.core.validators import ProhibitNullCharactersValidator

from engine.source import MAX_SUITE_BYTES
from runs.services import MAX_CONCURRENCY

TOO_LARGE = f"the suite is larger than {MAX_SUITE_BYTES // 1_000_000} MB; nothing was stored"


def oversized(text: str) -> bool:
    """Over the suite's 1 MB: such text is refused as it came, never copied, parsed or sent back."""
    return len(text) > MAX_SUITE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_SUITE_BYTES


def source_to_show(text: str) -> str | None:
    """What the editor shows again of text it refused: the text, or None (the saved version) when it is
    over the limit, where showing it would send it all back."""
    return None if oversized(text) else normalise_newlines(text)


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
        if oversized(self.cleaned_data["source"]):
            raise forms.ValidationError(TOO_LARGE)
        return normalise_newlines(self.cleaned_data["source"])


# The launch form's field for the suite variable NAME is `var-NAME` (engine.suitevars).
VAR_FIELD = "var-"


def launch_vars(data) -> dict[str, str]:
    """The suite variables a launch form gave: a field left blank gives none (the default applies, and a
    variable without one is refused, named)."""
    return {
        key.removeprefix(VAR_FIELD): value
        for key, value in data.items()
        if key.startswith(VAR_FIELD) and value.strip()
    }


class LaunchForm(forms.Form):
    model = forms.CharField(max_length=200, required=False, strip=True)
    concurrency = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, initial=10)
    version = forms.TypedChoiceField(coerce=int, required=False, empty_value=None)

    def __init__(self, *args, versions: list[int] | tuple[int, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["version"].choices = [(number, f"v{number}") for number in versions]
