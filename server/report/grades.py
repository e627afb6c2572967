"""The tint a paragraph gets in the report: a band of its Flesch-Kincaid grade, the last band being the
paragraphs that `margin check` flags (above the threshold)."""

from __future__ import annotations

# (class, lowest grade); each band ends where the next starts, or at the threshold.
BANDS = (("grade-easy", 0.0), ("grade-plain", 10.0), ("grade-dense", 13.0), ("grade-hard", 16.0))
OVER = "grade-over"
UNGRADED = "grade-none"


def tint(grade: float, threshold: float, flags_hard: bool) -> str:
    """The band a grade is shown in; above the threshold only when hard paragraphs are flagged at all
    (readability.enabled), as `margin check` flags them."""
    if grade > threshold:
        if flags_hard:
            return OVER
        grade = threshold  # the tint of the highest band under the threshold, as in the legend
    return next(name for name, lowest in reversed(BANDS) if grade >= lowest or lowest == BANDS[0][1])


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
