"""The tint a paragraph gets in the report: a band of its Flesch-Kincaid grade, the last band being the
paragraphs that `margin check` flags (above the threshold)."""

from __future__ import annotations

# (class, lowest grade); each band ends where the next starts, or at the threshold.
BANDS = (("grade-easy", 0.0), ("grade-plain", 10.0), ("grade-dense", 13.0), ("grade-hard", 16.0))
OVER = "grade-over"
UNGRADED = "grade-none"


def band_of(grade: float, threshold: float) -> str:
    if grade > threshold:
        return OVER
    name = BANDS[0][0]
    for band, lowest in BANDS:
        if grade >= lowest:
            name = band
    return name


def tint(grade: float, threshold: float, flags_hard: bool) -> str:
    """The band a grade is shown in: above the threshold only when hard paragraphs are flagged at all
    (readability.enabled), as `margin check` flags them."""
    return band_of(grade if flags_hard else min(grade, threshold), threshold)


def legend(threshold: float) -> list[tuple[str, str]]:
    """(class, words) for each band a paragraph can fall in, easiest first."""
    shown = []
    for index, (name, lowest) in enumerate(BANDS):
        if lowest >= threshold and index > 0:
            break
        upper = BANDS[index + 1][1] if index + 1 < len(BANDS) else threshold
        upper = min(upper, threshold)
        shown.append((name, f"grade {lowest:g} to {upper:g}" if lowest else f"up to grade {upper:g}"))
    shown.append((OVER, f"above grade {threshold:g}: hard to read"))
    shown.append((UNGRADED, "too short to grade"))
    return shown
