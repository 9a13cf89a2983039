"""A given history alone (`messages` without `prompt`, `input` or `turns`): the model replies to it once,
and that reply is graded as a scripted conversation's last one (the eval's checks, a `ground_truth`)."""

from __future__ import annotations

from ..schema import Eval
from .base import Step
from .scripted import Scripted


class History(Scripted):
    graded_per_turn = False  # one reply

    @staticmethod
    def script(ev: Eval, node: str) -> list[Step]:
        return [Step(None, [], f"{node}.messages")]
