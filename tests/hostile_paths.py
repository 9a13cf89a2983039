"""Send one suite text (a file named on the command line) through every way into the web app, in this
process: the API, the editor's as-you-type validation, save, create, upload and Import.

tests/web/test_bad_input.py runs it in a subprocess for texts that once crashed the process itself (40,000
nested `[` overflowed libyaml's C stack: SIGSEGV), which would take the test run down with it. Prints one
JSON line per path: {"path", "status", "body"}; EVALSITE_VAR_DIR must name an empty folder.
"""

from __future__ import annotations

import html
import json
import os
import sys


def main(source_file: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from projects.models import Membership, Project
    from suites.services import create_suite

    setup_test_environment()
    call_command("migrate", verbosity=0)
    with open(source_file, encoding="utf-8") as file:
        source = file.read()
    user = get_user_model().objects.create_user(username="alice", password="pw-alice-123")
    Membership.objects.create(project=Project.default(), user=user, role="admin")
    existing = create_suite(
        owner=user,
        source="name: keep-me\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n      - match: '*'\n",
    )
    client = Client(raise_request_exception=False)
    client.force_login(user)

    def upload():
        return SimpleUploadedFile("suite.yaml", source.encode(), content_type="application/x-yaml")

    requests = {
        "api": lambda: client.post(
            reverse("api:validate"), {"source": source}, content_type="application/json"
        ),
        "validate": lambda: client.post(reverse("suites:validate"), {"source": source}),
        "save": lambda: client.post(reverse("suites:detail", args=[existing.public_id]), {"source": source}),
        "new": lambda: client.post(reverse("suites:new"), {"source": source}),
        "upload": lambda: client.post(
            reverse("suites:upload"), {"file": upload(), "suite": existing.public_id}
        ),
        "import": lambda: client.post(reverse("suites:import"), {"pasted": source}),
        "import upload": lambda: client.post(reverse("suites:import"), {"files": [upload()]}),
    }
    for path, send in requests.items():
        print(json.dumps({"path": path, "started": True}), flush=True)
        response = send()
        body = html.unescape(response.content.decode())
        print(json.dumps({"path": path, "status": response.status_code, "body": body}), flush=True)
    print(json.dumps({"versions": existing.versions.count()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
