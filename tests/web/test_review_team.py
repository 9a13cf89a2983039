"""Reviewing as a team: members of the run's project who may label are asked to, each one's progress and
labels are shown apart, and any two who labelled the same conversations on one scale get their agreement."""

from __future__ import annotations

from fractions import Fraction

import pytest
from django.urls import reverse

from projects.models import Membership, Project
from projects.roles import Role
from runs.models import Label, ReviewAssignment
from tests.web.test_labels import played  # noqa: F401 (fixture)


def member(user, role: Role) -> Membership:
    return Membership.objects.create(project=Project.default(), user=user, role=role)


def row(page: str, marker: str) -> str:
    return page.split(marker)[1].split("</tr>")[0]


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_counts_labels_and_agreement(client, user, other_user, played):  # noqa: F811
    member(other_user, Role.REVIEWER)
    conversations = list(played.conversations.order_by("index"))
    client.force_login(other_user)  # the second reviewer labels through the page, not only the owner
    for conversation, score in zip(conversations[1:], [1, -1], strict=True):
        saved = client.post(
            reverse("runs:label", args=[played.pk, conversation.index]),
            {"score": str(score), "scale": "-3..3", "reason": f"m{conversation.index}"},
            HTTP_HX_REQUEST="true",
        )
        assert saved.status_code == 200
    for conversation, score in zip(conversations, [3, 2, -1], strict=True):
        Label.objects.create(conversation=conversation, created_by=user, scale="-3..3", score=score)
    client.force_login(user)
    review = reverse("runs:review", args=[played.pk])
    page = client.get(review).content.decode()
    assert "3 of 3 labelled" in row(page, 'data-reviewer="alice"')
    assert "2 of 3 labelled" in row(page, 'data-reviewer="mallory"')
    assert "Your labels" in page
    # By hand, on the two conversations both labelled: alice 2, -1 and mallory 1, -1.
    # Exact: 1 of 2. Within one level: 2 of 2. Quadratic-weighted kappa = 1 - observed / expected disagreement,
    # with disagreement weights (i - j)^2: observed (1 + 0) / 2; expected from the margins (each score 1/2):
    # (1/4) * ((2-1)^2 + (2+1)^2 + (-1-1)^2 + 0) = 7/2.
    kappa = 1 - Fraction(1, 2) / Fraction(7, 2)
    assert kappa == Fraction(6, 7)
    pair = row(page, 'data-pair="alice mallory"')
    cells = [cell.split("<")[0] for cell in pair.split('class="num">')[1:]]
    assert cells == ["2", "50%", "100%", f"{float(kappa):.2f}"]
    link = row(page, 'data-reviewer="mallory"').split('href="')[1].split('"')[0].replace("&amp;", "&")
    assert link.startswith(f"{review}?by={other_user.pk}&")
    others = client.get(link).content.decode()
    shown = others.split('id="labels-by"')[1].split("</section>")[0]
    assert "Labels by mallory" in shown and "m1" in shown and "m2" in shown and "eval-1" not in shown


@pytest.mark.django_db(transaction=True)
def test_members_are_asked_to_label_on_a_scale_and_roles_are_checked(
    client,
    user,
    other_user,
    django_user_model,
    played,  # noqa: F811
):
    member(other_user, Role.REVIEWER)
    viewer = django_user_model.objects.create_user(username="victor", password="pw-victor-123")
    member(viewer, Role.VIEWER)
    outsider = django_user_model.objects.create_user(username="olga", password="pw-olga-123")
    review = reverse("runs:review", args=[played.pk])
    client.force_login(user)
    page = client.get(review).content.decode()
    assert f'<option value="{other_user.pk}">mallory (reviewer)</option>' in page
    assert "victor" not in page  # a viewer may not label
    asked = client.post(
        reverse("runs:review_assign", args=[played.pk]), {"user": other_user.pk, "scale": "0-1"}
    )
    assert asked.status_code == 302
    assert ReviewAssignment.objects.get().scale == "0-1"
    page = client.get(review).content.decode()
    assert "0 of 3 labelled" in row(page, 'data-reviewer="mallory"') and "0-1" in row(
        page, 'data-reviewer="mallory"'
    )
    client.force_login(other_user)
    queue = client.get(review).content.decode()
    assert 'name="score" value="1"' in queue and 'name="score" value="-3"' not in queue  # on the asked scale
    assert (
        client.post(reverse("runs:review_assign", args=[played.pk]), {"user": other_user.pk}).status_code
        == 403
    )
    client.force_login(viewer)
    assert client.get(review).status_code == 403
    client.force_login(outsider)
    assert client.get(review).status_code == 404
    assert client.post(reverse("runs:label", args=[played.pk, 0]), {"score": "1"}).status_code == 404
    client.force_login(user)
    client.post(reverse("runs:review_unassign", args=[played.pk]), {"user": other_user.pk})
    assert not ReviewAssignment.objects.exists()
