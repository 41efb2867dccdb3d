"""The graded side of the made-up chapter 0 (tests only): what the grader draws and judges."""

from __future__ import annotations

import numpy as np
from grader.spec import Case, Check, GradedExercise, call, problem_with_tensor, value_of


class Double(GradedExercise):
    label = "ch0-ex-double"
    checks = (
        Check("twice", 2, "doubles any tensor", "Multiply every entry by 2."),
        Check("dtype", 1, "keeps the dtype", "Return a tensor of the input's dtype."),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            x = rng.standard_normal(int(rng.integers(1, 6))).astype(np.float32)
            expected = 2 * x
            cases.append(
                Case(
                    "twice",
                    call("double", x, shown=f"{x.size} numbers"),
                    lambda r, e=expected: problem_with_tensor(value_of(r), e),
                )
            )
        x64 = rng.standard_normal(4)
        cases.append(
            Case(
                "dtype",
                call("double", x64, shown="float64"),
                lambda r, e=2 * x64: problem_with_tensor(value_of(r), e, dtype="torch.float64"),
            )
        )
        return cases


class Total(GradedExercise):
    label = "ch0-ex-total"
    checks = (Check("sum", 1, "sums any tensor", "Add every entry; return a float."),)

    def cases(self, rng: np.random.Generator) -> list[Case]:
        x = rng.standard_normal(5)
        expected = float(x.sum())

        def judge(results):
            got = value_of(results)
            if not isinstance(got, float):
                return f"expected a float, got {type(got).__name__}"
            return None if abs(got - expected) < 1e-9 else f"off by {abs(got - expected):.3g}"

        return [Case("sum", call("total", x), judge)]


class Explain(GradedExercise):
    label = "ch0-ex-explain"
    manual_points = 2
    rubric = "Says that doubling every entry doubles the sum."


EXERCISES = [Double, Total, Explain]
