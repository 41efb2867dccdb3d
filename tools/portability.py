"""Run chapters under conditions that stand in for another machine (README.md, "Tests";
CONTRIBUTING.md, "Claims that hold on every machine").

A trained model or a random draw can come out differently on another CPU, another thread
count or a GPU: other SIMD kernels and another order of summation change the last bits of a
float, and training amplifies them. Each condition below changes one of those causes, and a
chapter's hidden guards must hold under all of them:

    python tools/portability.py check 06 --condition seed+1     one chapter, one condition
    python tools/portability.py check 06 07                     every condition
    python tools/portability.py measure 06 --json out.json      the guarded quantities of
                                                                every condition, guards off

``measure`` is how the guards' margins were derived: it runs each condition with the guards'
assertions disarmed and prints, for every quantity the chapter's guards test (``MEASURES``), the
smallest and largest value seen.

The conditions:

- ``threads=N``: torch uses N threads (a chapter's own ``torch.set_num_threads`` is overridden);
- ``cpu=default`` / ``cpu=avx2``: ATen's vectorised kernels of another CPU
  (``ATEN_CPU_CAPABILITY``, read when torch is imported);
- ``onednn=off``: torch's oneDNN (MKL-DNN) kernels switched off;
- ``seed+K``: every ``torch.manual_seed(s)`` of the chapter seeds ``s + K`` instead, so every
  model starts from other weights and every global random draw differs, while the data sets,
  which have generators of their own, stay the same.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
GUARD_TAG = "remove-cell"
GUARD_FIRST_LINE = "# Keeps the numbers the text quotes true."


@dataclass(frozen=True)
class Condition:
    """One stand-in for another machine."""

    name: str
    threads: int | None = None
    cpu_capability: str | None = None
    onednn: bool = True
    seed_offset: int = 0

    def environment(self) -> dict[str, str]:
        return {"ATEN_CPU_CAPABILITY": self.cpu_capability} if self.cpu_capability else {}

    def preamble(self) -> str:
        """Code run in the kernel before the chapter's first cell."""
        lines = ["import torch"]
        if self.threads is not None:
            lines += [
                f"torch.set_num_threads({self.threads})",
                "torch.set_num_threads = lambda n: None  # the condition's count stands",
            ]
        if not self.onednn:
            lines.append("torch.backends.mkldnn.enabled = False")
        if self.seed_offset:
            lines += [
                "_seed = torch.manual_seed",
                f"torch.manual_seed = lambda s: _seed(s + {self.seed_offset})",
            ]
        return "\n".join(lines) + "\n"


# The chapters whose claims rest on training or random draws.
PORTABLE_CHAPTERS = ("06", "07")

CONDITIONS = {
    condition.name: condition
    for condition in [
        Condition("as-written"),
        Condition("threads=2", threads=2),
        Condition("threads=4", threads=4),
        Condition("threads=1,onednn=off", threads=1, onednn=False),
        Condition("cpu=default", cpu_capability="default"),
        Condition("cpu=avx2", cpu_capability="avx2"),
        Condition("onednn=off", onednn=False),
        *(Condition(f"seed+{k}", seed_offset=k) for k in range(1, 7)),
        Condition(
            "seed+7,cpu=default,threads=2", threads=2, cpu_capability="default", seed_offset=7
        ),
    ]
}

# What `measure` reports for each chapter: the quantities its guards test, as expressions in
# the chapter's namespace once it has run.
MEASURES: dict[str, dict[str, str]] = {
    "06": {
        "no positions": "accuracies['none']",
        "learned": "accuracies['learned']",
        "sinusoidal": "accuracies['sinusoidal']",
        "rotary": "accuracies['rotary']",
        "most frequent guesses": "model_best",
        "loss difference, our loop vs train": "loss_gap",
        "three back, held-out mean": "three_back_mean",
        "three back, rows 3-15 brightest": (
            "all(int(k_back_weights[i].argmax()) == i - 3 for i in range(3, 16))"
        ),
        "three back, rows 3-15, smallest weight": "k_back_weights.diagonal(-3)[:13].min().item()",
        "uniform: previous-token, induction, previous-token 1-9": (
            "[chance_prev, chance_ind, chance_ten]"
        ),
        "scores above uniform: previous-token, induction": (
            "[float(prev_all) - chance_prev, float(ind_1) - chance_ind]"
        ),
        "two layers": "two",
        "one layer": "one",
        "one layer, spread over n": "max(by_length) - min(by_length)",
        "previous-token score": "prev_all",
        "induction score": "ind_1",
        "previous-token score, queries 1-9": "score",
        "older copies' share": "older.mean().item()",
        "zero ablation": "without_0",
        "mean ablation - zero ablation": "mean_0 - without_0",
        "key path removed": "paths['key']",
        "key path - zero ablation": "paths['key'] - without_0",
        "query path removed": "paths['query']",
        "value path removed": "paths['value']",
        "learned, positions 32-63": "far_accuracies['learned']",
        "sinusoidal, positions 32-63": "far_accuracies['sinusoidal']",
        "rotary, positions 32-63": "far_accuracies['rotary']",
        "learned, held-out set moved to 32-63": "moved['learned']",
        "sinusoidal, held-out set moved to 32-63": "moved['sinusoidal']",
        "rotary, held-out set moved to 32-63": "moved['rotary']",
        "positions 3-31, lowest of the three": "min(near_accuracies.values())",
        "induction head off": "without_induction_head",
        "prediction changes, learned": "changed['learned'].nonzero().flatten().tolist()",
        "prediction changes, none": "changed['none'].nonzero().flatten().tolist()",
        # Facts of one run, which the page says are of this run.
        "queries 0-2, weight on key 0": "k_back_weights[:3, 0].min().item()",
        "example, queries 7-13, 6 back": "min(float(weights_1[i, i - 6]) for i in range(7, 14))",
        "example, queries 14-19 on both copies": "min(float(w) for w in on_both)",
        "example, query 16, 6 back": "float(weights_1[16, 10])",
        "example, queries 17-19, 13 back": (
            "min(float(weights_1[i, i - 13]) for i in range(17, 20))"
        ),
        "example, layer 0 rows 1-10, one back": "weights_0.diagonal(-1)[:10].min().item()",
        "example, layer 0 rows 11-19, one back": "weights_0.diagonal(-1)[10:].max().item()",
        "example, layer 0 rows 1-9 look one back most": (
            "all(int(weights_0[i].argmax()) == i - 1 for i in range(1, 10))"
        ),
        "no positions, last loss": "histories['none'].losses[-1]",
        "formation, induction 5-80": "[round(formation[s][1], 3) for s in sorted(formation)]",
        "formation, previous 1-9 5-80": "[round(formation[s][0], 3) for s in sorted(formation)]",
        "formation, losses 5-80": "[round(early_losses[s], 4) for s in sorted(formation)]",
        "formation, step 5 above uniform": (
            "[formation[5][0] - chance_ten, formation[5][1] - chance_ind]"
        ),
        "formation, step 80 above uniform": (
            "[formation[80][0] - chance_ten, formation[80][1] - chance_ind]"
        ),
        "formation, induction rises at every step": "ind_curve == sorted(ind_curve)",
        "positions 3-31 on 64-token sequences, smallest": "min(near_accuracies.values())",
        "order-blind bound, window 8, at 32/128/512": "list(bounds[8].values())",
        "1 vs 2 layers, first 10 steps": "(smooth[2][:10] - smooth[1][:10]).abs().max().item()",
        "2 layers, last 50 steps, max": "smooth[2][-50:].max().item()",
        "1 layer, last 50 steps, min": "smooth[1][-50:].min().item()",
        "2 layers part from 1 layer": (
            "next(s for s in range(len(smooth[2])) if smooth[1][s] - smooth[2][s] > 0.3)"
        ),
        "2 layers below 0.2": "next(s for s in range(len(smooth[2])) if smooth[2][s] < 0.2)",
        "2 layers, 40 steps after the last above 1.5": "smooth[2][steep[-1] + 40].item()",
        "steps to 100 % training accuracy": (
            "{name: next((i for i, a in enumerate(h.accuracies) if a == 1), None)"
            " for name, h in histories.items()}"
        ),
    },
    "07": {
        "right padding, largest difference from alone": "max(right_worst.values())",
        "left padding, largest difference from alone": "max(r[0] for r in left_results.values())",
        "cached steps vs one pass": "(by_hand - full).abs().max().item()",
        "generates the repeat": "torch.equal(fast_tokens, repeat)",
        "same tokens with and without the cache": "torch.equal(slow_tokens, fast_tokens)",
        "logits with vs without the cache": "(slow_logits - fast_logits).abs().max().item()",
        "columns as positions, logit change": "moved['columns']",
        "shifted positions, logit change": "moved['shifted']",
        "rotary shift, score difference": "rotary_shift",
        "gradients vs SDPA": "max(gradient_diff.values())",
        "GQA with h_kv = h vs MultiHeadAttention": "float(difference)",
        "chapter 6's rotary model, same tokens with and without the cache": (
            "torch.equal(uncached, cached)"
        ),
        "chapter 6's rotary model, smallest gap of the two best logits": (
            "(lambda top2: (top2[..., 0] - top2[..., 1]).min().item())"
            "(uncached_logits.topk(2, dim=-1).values)"
        ),
        "chapter 6's rotary model, logits with vs without the cache": "logit_gap",
        "chapter 6's rotary model, each new token four places back": (
            "torch.equal(cached[:, 8:], cached[:, 4:-4])"
        ),
        "rotary GQA model, cached steps vs one pass": "llama_gap",
        "explicit peak, (1, h, t, t) matrices, 1 and 4 layers": "[peaks[1], peaks[4]]",
        # Facts of one run, which the page says are of this run.
        "decoding time vs h_kv = 32, h_kv = 8 and 1": (
            "[decode_times[8] / decode_times[32], decode_times[1] / decode_times[32]]"
        ),
    },
}


def is_guard(cell: nbformat.NotebookNode) -> bool:
    return (
        cell.cell_type == "code"
        and GUARD_TAG in cell.metadata.get("tags", [])
        and cell.source.startswith(GUARD_FIRST_LINE)
    )


def disarmed(source: str) -> str:
    """A guard cell's code with each ``assert`` evaluated but never raising, so that ``measure``
    keeps the names a guard cell defines and runs past a guard that fails."""
    tree = ast.parse(source)

    class Disarm(ast.NodeTransformer):
        def visit_Assert(self, node: ast.Assert) -> ast.AST:
            return ast.Try(
                body=[ast.Expr(node.test)],
                handlers=[ast.ExceptHandler(type=None, name=None, body=[ast.Pass()])],
                orelse=[],
                finalbody=[],
            )

    return ast.unparse(ast.fix_missing_locations(Disarm().visit(tree)))


def chapter_path(chapter: str) -> Path:
    (path,) = BOOK.glob(f"{chapter}_*.ipynb")
    return path


def prepared(chapter: str, condition: Condition, *, guards: bool) -> nbformat.NotebookNode:
    """The chapter with the condition's preamble first, and its guards disarmed if asked."""
    notebook = nbformat.read(chapter_path(chapter), as_version=4)
    if not guards:
        for cell in notebook.cells:
            if is_guard(cell):
                cell.source = disarmed(cell.source)
    notebook.cells = [nbformat.v4.new_code_cell(condition.preamble()), *notebook.cells]
    if not guards:
        expressions = MEASURES.get(chapter, {})
        notebook.cells.append(
            nbformat.v4.new_code_cell(
                "import json as _json\n"
                f"_measures = {expressions!r}\n"
                "_values = {}\n"
                "for _name, _expression in _measures.items():\n"
                "    try:\n"
                "        _values[_name] = eval(_expression)\n"
                "    except Exception as _error:\n"
                "        _values[_name] = f'{type(_error).__name__}: {_error}'\n"
                "print('MEASURED ' + _json.dumps(_values, default=float))\n"
            )
        )
    return notebook


def execute(notebook: nbformat.NotebookNode, condition: Condition, timeout: int) -> None:
    saved = dict(os.environ)
    os.environ.update(condition.environment())
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("ATTENTION_FROM_SCRATCH_OFFLINE", "1")
    try:
        NotebookClient(
            notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": BOOK}}
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def check(chapter: str, condition: Condition, timeout: int = 900) -> str | None:
    """Run the chapter with its guards under the condition; what failed, or None."""
    try:
        execute(prepared(chapter, condition, guards=True), condition, timeout)
    except CellExecutionError as error:
        return str(error)
    return None


def measure(chapter: str, condition: Condition, timeout: int = 900) -> dict[str, object]:
    """The chapter's guarded quantities under the condition, its guards disarmed."""
    notebook = prepared(chapter, condition, guards=False)
    execute(notebook, condition, timeout)
    for output in notebook.cells[-1].outputs:
        for line in output.get("text", "").splitlines():
            if line.startswith("MEASURED "):
                return json.loads(line.removeprefix("MEASURED "))
    raise RuntimeError(f"chapter {chapter}: the measuring cell printed nothing")


def spread(runs: dict[str, dict[str, object]]) -> dict[str, tuple[object, object]]:
    """The smallest and largest value of each quantity over the runs."""
    names = {name for values in runs.values() for name in values}
    result = {}
    for name in sorted(names):
        values = [values[name] for values in runs.values() if name in values]
        try:
            result[name] = (min(values), max(values))  # type: ignore[type-var]
        except TypeError:
            result[name] = (values[0], values[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["check", "measure"])
    parser.add_argument("chapters", nargs="+", help="chapter numbers, e.g. 06 07")
    parser.add_argument(
        "--condition",
        action="append",
        choices=sorted(CONDITIONS),
        help="one condition (repeatable); every condition when left out",
    )
    parser.add_argument("--json", type=Path, help="measure: write every run's values here")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args(argv)
    conditions = [CONDITIONS[name] for name in args.condition or CONDITIONS]
    failures = 0
    for chapter in args.chapters:
        runs: dict[str, dict[str, object]] = {}
        for condition in conditions:
            print(f"chapter {chapter}, {condition.name} ...", flush=True)
            if args.action == "check":
                problem = check(chapter, condition, args.timeout)
                failures += problem is not None
                print("  ok" if problem is None else textwrap.indent(problem[-3000:], "  "))
            else:
                runs[condition.name] = measure(chapter, condition, args.timeout)
                print("  " + json.dumps(runs[condition.name]), flush=True)
        if args.action == "measure":
            print(f"chapter {chapter}: smallest and largest of {len(runs)} runs")
            for name, (low, high) in spread(runs).items():
                print(f"  {name}: {low} .. {high}")
            if args.json:
                args.json.write_text(json.dumps(runs, indent=1), encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
