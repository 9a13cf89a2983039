"""Renames every stored attached file whose name the attached-file rules refuse (engine.attached: a folder,
`..`, a space, a character an address must escape), which once came in through the API and made every page
of its version fail. `../../etc/passwd` becomes `passwd`; a name already taken in the version gets `-2`,
`-3`, … before its extension.

The version's YAML is left as it was written: a version is the record of what was saved, runs point at it,
and its kept parse (ParsedVersion) still holds what the old name brought in, so its runs and launches are
unchanged. A reference to the old name is shown on the version's page as a file that is not attached, for
the next save to correct. The version's hash is recomputed, since it covers the file names."""

import hashlib

from django.db import migrations

from engine.attached import FILE_NAME, safe_file_name


def _free_name(wanted: str, taken: set[str]) -> str:
    if wanted not in taken:
        return wanted
    stem, dot, extension = wanted.rpartition(".")
    if not stem:
        stem, dot, extension = wanted, "", ""
    number = 2
    while True:
        suffix = f"-{number}"
        candidate = f"{stem[: 200 - len(suffix) - len(dot + extension)]}{suffix}{dot}{extension}"
        if candidate not in taken:
            return candidate
        number += 1


def _content_hash(source: str, files: dict[str, str]) -> str:
    # As suites.models.content_hash at the time of this migration.
    digest = hashlib.sha256(source.encode("utf-8"))
    for name in sorted(files):
        digest.update(b"\0" + name.encode("utf-8") + b"\0" + files[name].encode("utf-8"))
    return digest.hexdigest()


def rename_unsafe(apps, schema_editor):
    SuiteFile = apps.get_model("suites", "SuiteFile")
    SuiteVersion = apps.get_model("suites", "SuiteVersion")
    unsafe = [item for item in SuiteFile.objects.only("id", "name", "version_id") if not FILE_NAME.match(item.name)]
    for version_id in sorted({item.version_id for item in unsafe}):
        files = list(SuiteFile.objects.filter(version_id=version_id).order_by("name"))
        taken = {item.name for item in files if FILE_NAME.match(item.name)}
        for item in files:
            if FILE_NAME.match(item.name):
                continue
            item.name = _free_name(safe_file_name(item.name), taken)
            taken.add(item.name)
            SuiteFile.objects.filter(pk=item.pk).update(name=item.name)
        source = SuiteVersion.objects.values_list("source", flat=True).get(pk=version_id)
        digest = _content_hash(source, {item.name: item.content for item in files})
        SuiteVersion.objects.filter(pk=version_id).update(sha256=digest)


class Migration(migrations.Migration):
    dependencies = [
        ("suites", "0003_parsed_version"),
    ]

    operations = [
        migrations.RunPython(rename_unsafe, migrations.RunPython.noop),
    ]
