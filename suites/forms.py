"""Forms for the suite editor. Validation of the YAML itself lives in the engine."""

from django import forms
from django.core.validators import ProhibitNullCharactersValidator

from engine.source import MAX_SUITE_BYTES

TOO_LARGE = f"the suite is larger than {MAX_SUITE_BYTES // 1_000_000} MB; nothing was stored"


def oversized(text: str) -> bool:
    """Over the suite's size limit: such text is refused as it came, never copied, parsed or sent back."""
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
