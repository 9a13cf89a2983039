"""Text the stylesheet colours itself that axe's contrast rule does not check: placeholders, which WCAG's 4.5:1
still covers (they say what a field takes)."""

from __future__ import annotations

import re
from pathlib import Path

CSS = (Path(__file__).resolve().parents[2] / "static" / "css" / "app.css").read_text()


def luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(first: str, second: str) -> float:
    a, b = sorted((luminance(first), luminance(second)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def variable(name: str) -> str:
    return re.search(rf"--{name}:\s*#([0-9a-fA-F]{{6}})", CSS).group(1)


def test_placeholders_are_readable_on_every_surface_a_field_sits_on():
    placeholder = re.search(r"::placeholder\s*\{\s*color:\s*#([0-9a-fA-F]{6})", CSS).group(1)
    for surface in ("surface", "surface-2", "bg"):
        assert contrast(placeholder, variable(surface)) >= 4.5, surface
