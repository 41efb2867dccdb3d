"""What the tests of each chapter's exercises ask of a graded answer (hidden checks included)."""

from __future__ import annotations

from attention_from_scratch.exercises import run_checks


def full_marks(label: str, namespace: dict) -> bool:
    """Whether the answer earns every point, public and hidden."""
    result = run_checks(label, namespace, hidden=True)
    return result.passed and result.earned == result.possible > 0


def reasons(label: str, namespace: dict, hidden: bool = True, hints: bool = False) -> str:
    """Every failed check's reason (and hint, with ``hints``), in one string; the answer must
    earn less than full marks."""
    result = run_checks(label, namespace, hidden=hidden)
    assert result.earned < result.possible, "expected less than full marks"
    return " | ".join(
        f"{c.reason} {c.hint}" if hints else c.reason for c in result.checks if not c.passed
    )
