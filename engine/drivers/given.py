"""A given reply (`reply`, after any `messages`): graded as it stands, as a scripted conversation's last reply
(the eval's checks, a `ground_truth`). No model is called: the turn's reply is the text the eval gives. This
is how a judge is calibrated on conversations people have scored (engine.calibration)."""

from __future__ import annotations

from ..schema import Eval
from .base import Step
from .scripted import Scripted


class Given(Scripted):
    graded_per_turn = False  # one reply

    @staticmethod
    def script(ev: Eval, node: str) -> list[Step]:
        return [Step(None, [], f"{node}.reply", reply=ev.reply)]
