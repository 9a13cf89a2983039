"""Small wording helpers shared by the CLI report, the engine's verdicts and the pages."""


def plural(count: int, word: str) -> str:
    """ "1 turn", "3 turns"."""
    return f"{count} {word}{'' if count == 1 else 's'}"
