"""`ckpt-jax reproduce`: run every experiment and write ``report.md``.

Each experiment writes ``NAME.json`` last and atomically, so an interrupted run resumes
from the experiments already finished (a JSON of the same size is reused, never re-run
and never double counted). Each records its size, the package version and the
experiment's parameters (its entry of the size table). Results never mix: a folder holding
results of another size, another version or other parameters is refused
(``ResultConflict``) unless ``resume=False`` (``--restart``), which discards them first. A
``NAME.json`` that is not a result (torn, edited into another form) is said in one line and
run again.

The report has one row per sub-claim (a claim, or one part of it such as 5 memory or 8a),
each with its own verdict decided by the experiment's rules and named thresholds; a claim's
verdict combines them by `ckpt_jax.experiments.rules.combine`. Numbers are given in prose
and tables, figures under the sub-claim they show; the full values stay in the JSON files.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import time
from collections.abc import Iterable
from pathlib import Path

from ._io import atomic_write_bytes
from .experiments import (
    EXPERIMENTS,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    PARTIALLY,
    REPRODUCED,
    VERDICTS,
    Experiment,
    check_size,
    fmt,
    provenance,
    rules,
    to_jsonable,
    write_json,
)

__all__ = ["reproduce", "write_report", "CLAIMS", "CLAIM_NAMES", "ResultConflict"]

# The claims of docs/model.md §3, restated briefly for the report.
CLAIMS = {
    1: "Pairwise neutrality: two identical jobs (d < T) have P(δ) = δ for every δ under storage "
    "contention, a power cap, or both.",
    2: "Reciprocal spectrum: in the fully overlapping branch the gap map has λ_j = (N−j)f(j)/(j f(N−j)), "
    "so λ_j λ_{N−j} = 1, det = 1 and ⌈N/2⌉−1 directions expand (confirmed by autodiff).",
    3: "Firing order is a constant of motion: identical jobs never overtake and never merge.",
    4: "Collision-free configurations are invariant and not reached from outside.",
    5: "No clustering: the smallest phase gap does not shrink; nearby trajectories separate with an "
    "FTLE that grows with N and load ρ; a trajectory keeps no memory of its launch beyond the firing "
    "order. Measured finding of docs/model.md: the FTLE grows with N and load up to a peak near storage "
    "saturation (ρ ≈ 0.75–1.25), then falls, and high-load rates keep falling with the horizon, so the "
    "regime is reported, not a blanket verdict.",
    6: "Bursts without synchrony: the upper tail of n_w is heavier than Binomial(N, p) with p the "
    "fleet's writing fraction.",
    7: "Jitter sets stagger lifetime: with compute jitter σ the lifetime of a stagger of margin m "
    "scales as (m/σ)², not with the FTLE.",
    8: "Boundary conditions restore coupling: (a) heterogeneity + binding cap, (b) a delayed controller "
    "(sign depends on τ), (c) asynchronous checkpoints. Measured finding of docs/model.md: under the "
    "anonymous base model a pair is exactly two solo jobs, so 8a cannot hold there.",
    9: "Neutrality needs anonymity: non-anonymous sharing (job sizes under maxmin/uniform power, fcfs "
    "storage) couples a pair.",
    10: "Contention-aware checkpoint intervals: single-job waste matches the renewal formula and "
    "Young/Daly; a fleet's optimal intervals differ from each job's own.",
    11: "Asynchrony and phase-blindness: with two-level checkpoints the coupling function of identical jobs "
    "is exactly zero while drains keep up (D(n) ≤ T) and non-zero once they back up; the boundary is stated. "
    "Measured finding of docs/model.md: coupling appears only in the band D(1) < T < D(2) − s (D(2)/D(1) − 1).",
    12: "Power steps: the largest fall of a fleet's power draw per cycle, for random launches against a "
    "staggered launch and independent phases, and for two-level checkpoints against blocking writes.",
    13: "Interval design against cooperative scheduling: on the peer's cielo workload, the waste of Young's "
    "periods under no interference, proportional sharing, FCFS (blocking and not) and cooperative scheduling, "
    "against intervals designed under proportional sharing and under cooperative scheduling.",
    14: "Common causes make storms; stagger removes them: after a fleet-wide outage identical jobs restart "
    "together; (a) without jitter every later cycle has all N writing at once; (b) with compute jitter σ the "
    "storm dissolves after ~(m/σ)² cycles; (c) where (N−1)·D(1) ≤ T a restart stagger Δ = D(1) is collision "
    "free for good, at a mean extra down time of (N−1)Δ/2 per job. Measured finding of docs/model.md: (b) holds "
    "only where the synchronous state is neutral (f ∝ n, or N = 2); under storage contention with N ≥ 3 the "
    "storm dissolves in ~log(m/σ) cycles. (d) On a realistic cluster with an outage rate (the LLM cluster "
    "example): what the outages and the storms after them cost, and whether a restart stagger pays.",
    15: "Checkpoints as they cost: with a fixed overhead o per checkpoint the best interval of a lone job moves "
    "from about √(2DM) to about √(2(o + D)M); on the LLM cluster example and a sweep of o from 0 to 120 s, how "
    "far the designed intervals move and the GPU-hours a day they save against today's and against Young with "
    "and without o.",
}
CLAIM_NAMES = {
    1: "pairwise neutrality",
    2: "reciprocal spectrum",
    3: "firing order invariant",
    4: "collision-free set invariant",
    5: "no clustering",
    6: "bursts without synchrony",
    7: "jitter sets stagger lifetime",
    8: "boundary conditions restore coupling",
    9: "neutrality needs anonymity",
    10: "contention-aware intervals",
    11: "asynchrony and phase-blindness",
    12: "power steps",
    13: "interval design against cooperative scheduling",
    14: "common causes make storms; stagger removes them",
    15: "checkpoints as they cost",
}

VERDICT_WORDS = {
    REPRODUCED: "the data support the claim by its stated rule (for a claim of no effect: the "
    "interval of the effect lies inside the stated margin, so an effect that large would have shown)",
    NOT_REPRODUCED: "the data contradict the claim by the same rule (the interval lies wholly outside "
    "the margin, or an exact statement fails its tolerance)",
    PARTIALLY: "some parts (cells, sub-claims) are reproduced and some are not",
    INCONCLUSIVE: "this run cannot decide: an interval straddles a margin's edge or too few points were "
    "usable; the sub-claim's text says what a larger size (`--full`) needs",
}


class ResultConflict(ValueError):
    """The output folder holds results of another size, another version of ckpt_jax or other
    parameters (they are never reused, mixed or overwritten silently)."""


_BY_NAME = {experiment.name: experiment for experiment in EXPERIMENTS}


def _experiment(name: str) -> Experiment:
    """The experiment of `EXPERIMENTS` called ``name`` (a `ValueError` naming them otherwise)."""
    if name not in _BY_NAME:
        raise ValueError(f"experiment must be one of {list(_BY_NAME)}, got {name!r}")
    return _BY_NAME[name]


def _stored(out_dir: Path, name: str) -> tuple:
    """``(result, None)`` for a result ``out_dir/name.json`` of any size; ``(None, why)`` for
    a file that is not one (torn, edited into another form); ``(None, None)`` if absent."""
    path = out_dir / f"{name}.json"
    if not path.exists():
        return None, None
    if not path.is_file():  # a FIFO would block the read
        return None, "not a file"
    try:
        result = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        return None, f"unreadable ({type(err).__name__})"
    why = _malformed(result, name)
    return (None, why) if why else (result, None)


def _malformed(result, name: str) -> str | None:
    """Why ``result`` is not a result the report can show, or None."""

    def wrong(where, value, kind) -> str | None:
        if isinstance(value, kind) and not isinstance(value, bool):
            return None
        kinds = kind if isinstance(kind, tuple) else (kind,)
        return f"{where} is {type(value).__name__}, not {' or '.join(k.__name__ for k in kinds)}"

    if not isinstance(result, dict):
        return f"not a result: a JSON {type(result).__name__}, not an object"
    fields = {"size": str, "numbers": dict, "verdicts": list, "figures": list}
    problems = [None if result.get("name") == name else f"its name is {result.get('name')!r}"]
    problems += [wrong(key, result.get(key), kind) for key, kind in fields.items()]
    if "wall_seconds" in result:
        problems.append(wrong("wall_seconds", result["wall_seconds"], (int, float)))
    problems += [wrong(f"figures[{k}]", figure, str) for k, figure in enumerate(result.get("figures") or [])]
    verdicts = result.get("verdicts")
    for k, entry in enumerate(verdicts if isinstance(verdicts, list) else []):
        if not isinstance(entry, dict):
            problems.append(wrong(f"verdicts[{k}]", entry, dict))
            continue
        if entry.get("verdict") not in VERDICTS:
            problems.append(f"verdicts[{k}].verdict is {entry.get('verdict')!r}, not one of {list(VERDICTS)}")
        text = (str, type(None))  # the report shows None as nothing
        entry_fields = {
            "claim": int,
            "sub_claim": str,
            "why": str,
            "title": text,
            "headline": text,
            "rule": text,
            "thresholds": dict,
            "figures": list,
            "measured": dict,
        }
        problems += [wrong(f"verdicts[{k}].{key}", entry.get(key), kind) for key, kind in entry_fields.items()]
        problems += [wrong(f"verdicts[{k}].figures[{j}]", f, str) for j, f in enumerate(entry.get("figures") or [])]
        table = entry.get("table")
        if table is not None and not (
            isinstance(table, dict)
            and isinstance(table.get("columns"), list)
            and isinstance(table.get("rows"), list)
            and all(isinstance(row, list) and len(row) == len(table["columns"]) for row in table["rows"])
        ):
            problems.append(f"verdicts[{k}].table is not columns and rows of one cell per column")
    problems = [problem for problem in problems if problem]
    return f"not a result: {problems[0]}" if problems else None


def _conflict(name: str, result: dict, size: str) -> tuple | None:
    """``(kind, detail)`` where a stored result is not what this run would write (another
    size, version or parameters), else None."""
    if result["size"] != size:
        return "size", result["size"]
    expected = provenance(_experiment(name), size)
    if result.get("version") != expected["version"]:
        version = result.get("version")
        return "version", f"ckpt_jax {version}" if isinstance(version, str) else "an unrecorded version"
    saved = result.get("parameters")
    if to_jsonable(saved) != expected["parameters"]:
        now = expected["parameters"]
        saved = saved if isinstance(saved, dict) else {}
        keys = sorted(key for key in set(saved) | set(now) if saved.get(key) != now.get(key))
        return "parameters", ", ".join(keys)
    return None


def _conflict_message(out_dir: Path, conflicts: dict, size: str) -> str:
    """One line: what the folder holds that this run would not reuse, and what to do."""
    by_kind: dict = {}
    for name, (kind, detail) in sorted(conflicts.items()):
        by_kind.setdefault(kind, []).append((name, detail))
    parts = []
    if "size" in by_kind:
        sizes = sorted({detail for _, detail in by_kind["size"]})
        parts.append(f"{'/'.join(map(repr, sizes))} results ({', '.join(f'{n}.json' for n, _ in by_kind['size'])})")
    if "version" in by_kind:
        listed = ", ".join(f"{n}.json: {detail}" for n, detail in by_kind["version"])
        parts.append(f"results of another version ({listed})")
    if "parameters" in by_kind:
        listed = ", ".join(f"{n}.json: {detail}" for n, detail in by_kind["parameters"])
        parts.append(f"results of other parameters ({listed})")
    version = provenance(_experiment(next(iter(conflicts))), size)["version"]
    return (
        f"{out_dir} holds {'; '.join(parts)}; a {size!r} run of ckpt_jax {version} would overwrite them: use "
        "another --out, or --restart to discard them"
    )


def _discard(out_dir: Path, results: dict) -> None:
    """Removes the JSON and the figures of results this run cannot reuse (``--restart``)."""
    for name, result in results.items():
        for figure in result.get("figures", []):
            path = out_dir / Path(figure).name
            if path.exists():
                path.unlink()
        (out_dir / f"{name}.json").unlink()


def reproduce(
    out_dir: Path,
    size: str = "quick",
    only: Iterable[str] | None = None,
    progress: bool = True,
    resume: bool = True,
    log=print,
) -> dict:
    """Runs the experiments (all, or ``only``) and writes ``out_dir/report.md``.

    Args:
      out_dir: output folder (created if missing).
      size: "smoke", "quick" or "full".
      only: names of the experiments to run (default: all of `ckpt_jax.experiments.EXPERIMENTS`).
      progress: progress bars.
      resume: reuse finished results of this size. With ``resume=False`` every experiment
        is run again and results of other sizes in ``out_dir`` are discarded first.
      log: one-line progress messages.

    Returns:
      ``{name: result dict}`` for every experiment of this size whose JSON is in ``out_dir``.

    Raises:
      ResultConflict: ``out_dir`` holds results of another size, version or parameters and
        ``resume`` is True.
    """
    check_size(size)
    out_dir = Path(out_dir)
    names = list(_BY_NAME) if not only else list(only)
    for name in names:
        _experiment(name)  # validate every name before running anything
    stored = {name: _stored(out_dir, name) for name in _BY_NAME} if out_dir.exists() else {}
    conflicts = {name: _conflict(name, result, size) for name, (result, _) in stored.items() if result is not None}
    conflicts = {name: conflict for name, conflict in conflicts.items() if conflict is not None}
    if conflicts and resume:
        raise ResultConflict(_conflict_message(out_dir, conflicts, size))
    out_dir.mkdir(parents=True, exist_ok=True)
    if conflicts:
        log(f"discarding {len(conflicts)} results of another size, version or parameters in {out_dir} (restart)")
        _discard(out_dir, {name: stored[name][0] for name in conflicts})
    finished = {name: result for name, (result, _) in stored.items() if result is not None and name not in conflicts}
    for name, (_, why) in stored.items():
        if why is not None:
            then = "running it again" if name in names else f"left out of the report (rerun with --only {name})"
            log(f"{out_dir / f'{name}.json'} is {why}; {then}")
    results = {}
    for index, name in enumerate(names, 1):
        done = finished.get(name) if resume else None
        if done is not None:
            log(f"[{index}/{len(names)}] {name}: already done, reusing {name}.json")
            results[name] = done
            continue
        log(f"[{index}/{len(names)}] {name} ({size}) ...")
        start = time.perf_counter()
        result = _experiment(name).run(out_dir, size=size, progress=progress)
        # Wall time of the whole call, JIT compilation included: what a user waits for.
        result["wall_seconds"] = time.perf_counter() - start
        write_json(out_dir / f"{name}.json", result)
        log(f"[{index}/{len(names)}] {name}: {_summary(result)} in {result['wall_seconds']:.1f} s")
        results[name] = result
    # The report covers every finished experiment of this size in the folder, not only this call's.
    for name in _BY_NAME:
        if name not in results and name in finished:
            results[name] = finished[name]
    write_report(out_dir, results, size)
    return results


def _summary(result: dict) -> str:
    return ", ".join(f"claim {v.get('sub_claim', v['claim'])}: {v['verdict']}" for v in result.get("verdicts", []))


def _cell(text) -> str:
    """A markdown table cell: pipes escaped, no line breaks."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(columns, rows) -> list:
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _measured_table(measured: dict, json_name: str) -> list:
    """Fallback for a verdict without a table: its scalar numbers, formatted."""
    rows, skipped = [], []
    for key, value in measured.items():
        if isinstance(value, (dict, list)):
            skipped.append(key)
        else:
            rows.append([key.replace("_", " "), fmt(value)])
    lines = _table(["quantity", "value"], rows) if rows else []
    if skipped:
        lines += ["", f"Also in `{json_name}`: " + ", ".join(k.replace("_", " ") for k in skipped) + "."]
    return lines


def _constant(value) -> str:
    """A named threshold as written in the code: 1e-12, 0.02, 500."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _claims_of_experiments() -> set:
    return {claim for experiment in EXPERIMENTS for claim in experiment.claims}


def _entries(results: dict) -> dict:
    """``{claim: [(experiment, result, verdict entry), ...]}`` in the order of `EXPERIMENTS`."""
    by_claim: dict[int, list] = {claim: [] for claim in CLAIMS}
    order = {name: k for k, name in enumerate(_BY_NAME)}
    for name in sorted(results, key=lambda n: order.get(n, len(order))):
        for entry in results[name].get("verdicts", []):
            by_claim.setdefault(entry["claim"], []).append((name, results[name], entry))
    return by_claim


def _figures_by_entry(results: dict) -> dict:
    """``{(experiment, sub_claim): [figure, ...]}``: each figure once, under the sub-claim that
    names it, or under its experiment's first sub-claim if none does."""
    placed = {}
    for name, result in results.items():
        verdicts = result.get("verdicts", [])
        if not verdicts:
            continue
        owned = set()
        for entry in verdicts:
            figures = [f for f in entry.get("figures", []) if f not in owned]
            owned |= set(figures)
            placed[(name, entry.get("sub_claim", str(entry["claim"])))] = figures
        first = (name, verdicts[0].get("sub_claim", str(verdicts[0]["claim"])))
        placed[first] = placed[first] + [f for f in result.get("figures", []) if f not in owned]
    return placed


def _run_time_lines(results: dict, size: str) -> list:
    rows, total = [], 0.0
    for name in _BY_NAME:
        if name not in results:
            continue
        seconds = results[name].get("wall_seconds")
        if seconds is None:
            seconds = results[name].get("numbers", {}).get("seconds")
        if isinstance(seconds, (int, float)):
            total += seconds
        rows.append([f"`{name}`", fmt(seconds, 2) if isinstance(seconds, (int, float)) else "n/a"])
    rows.append(["**total**", f"**{total:.0f} s ({total / 60:.1f} min)**"])
    machine = f"{os.cpu_count()} CPU cores ({platform.machine()}), Python {platform.python_version()}"
    try:
        import jax

        machine += f", JAX {jax.__version__} ({jax.default_backend()} backend)"
    except Exception:  # noqa: BLE001 - the report must not fail for want of a version string
        pass
    return [
        "## Run time",
        "",
        f"Wall time of each experiment at size `{size}`, JIT compilation included, as measured when it ran. "
        f"This report was written on {machine}.",
        "",
        *_table(["experiment", "wall time (s)"], rows),
    ]


def write_report(out_dir: Path, results: dict, size: str) -> Path:
    """Writes ``report.md``: the sub-claim verdict table, then per claim its statement, and per
    sub-claim its verdict, reasons, rule, thresholds, numbers and figures."""
    by_claim = _entries(results)
    figures = _figures_by_entry(results)
    covered = _claims_of_experiments()
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [
        "# ckpt_jax: reproduction report",
        "",
        f"Size `{size}`, generated {stamp} by `ckpt-jax reproduce`. The claims are those of docs/model.md §3. "
        "Every verdict was decided by a rule and named thresholds in the experiment's code "
        "(`ckpt_jax/experiments/`), not by hand. Numbers here are rounded; the full values are in each "
        "experiment's JSON file beside this report.",
        "",
        "## Verdicts",
        "",
    ]
    rows = []
    for claim, entries in sorted(by_claim.items()):
        name = CLAIM_NAMES.get(claim, "")
        if not entries:
            state = "not run" if claim in covered else "no experiment yet"
            rows.append([f"{claim} {name}", "-", state, "-", "-"])
            continue
        overall = rules.combine(e["verdict"] for _, _, e in entries)
        for k, (experiment, _, entry) in enumerate(entries):
            label = f"{claim} {name}: **{overall}**" if k == 0 else ""
            rows.append(
                [
                    label,
                    entry.get("sub_claim", str(claim)) + (f": {entry['title']}" if entry.get("title") else ""),
                    f"**{entry['verdict']}**",
                    entry.get("headline") or "",
                    f"`{experiment}`",
                ]
            )
    lines += _table(["claim: verdict", "sub-claim", "verdict", "deciding numbers", "experiment"], rows)
    lines += [
        "",
        "**What the verdicts mean.** " + " ".join(f"*{word}*: {text}." for word, text in VERDICT_WORDS.items()),
        "",
        f"**How a claim's verdict is combined from its sub-claims** (and a sub-claim's from its cells): "
        f"{rules.COMBINATION_RULE}.",
        "",
        "**Claims of no effect and of a law need power.** The smallest gap and the launch memory (claim 5) "
        "and the lifetime exponent (claim 7) are decided by equivalence: the "
        f"{rules.CONFIDENCE:.0%} bootstrap interval of the effect must lie inside a margin stated in the code "
        f"(two one-sided tests at {(1 - rules.CONFIDENCE) / 2:.0%} each). Each such sub-claim states its margin, "
        "the power it had to conclude *reproduced* had there been no effect, and the smallest effect it would have "
        f"detected with {rules.POWER:.0%} power; a run too small for its margin says *inconclusive*, not *reproduced*. "
        f"Unless stated otherwise, every interval in this report is a {rules.CONFIDENCE:.0%} bootstrap interval.",
        "",
    ]
    lines += _run_time_lines(results, size)
    for claim, entries in sorted(by_claim.items()):
        title = CLAIM_NAMES.get(claim, "")
        lines += ["", f"## Claim {claim}: {title}", "", f"> {CLAIMS.get(claim, '')}", ""]
        if not entries:
            if claim in covered:
                lines.append("Not run in this folder (use `ckpt-jax reproduce` without `--only`).")
            else:
                lines.append("No experiment in this version measures this claim.")
            continue
        overall = rules.combine(e["verdict"] for _, _, e in entries)
        if len(entries) > 1:
            parts = ", ".join(f"{e.get('sub_claim')} {e['verdict']}" for _, _, e in entries)
            lines += [f"**Claim {claim}: {overall}** (sub-claims: {parts}).", ""]
        for experiment, result, entry in entries:
            sub = entry.get("sub_claim", str(claim))
            heading = f"### {sub}" + (f": {entry['title']}" if entry.get("title") else "")
            lines += [
                heading,
                "",
                f"**{entry['verdict']}** (experiment `{experiment}`, size `{result.get('size')}`)",
                "",
                entry["why"],
                "",
            ]
            if entry.get("rule"):
                lines += [f"*Rule.* {entry['rule']}", ""]
            if entry.get("thresholds"):
                named = ", ".join(f"`{k}` = {_constant(v)}" for k, v in entry["thresholds"].items())
                lines += [f"*Named thresholds* (in `ckpt_jax/experiments/{experiment}.py`): {named}.", ""]
            table = entry.get("table")
            if table:
                lines += _table(table["columns"], table["rows"]) + [""]
            elif entry.get("measured"):
                lines += _measured_table(entry["measured"], f"{experiment}.json") + [""]
            for figure in figures.get((experiment, sub), []):
                lines += [f"![{experiment}: {Path(figure).stem}]({figure})", ""]
    path = Path(out_dir) / "report.md"
    atomic_write_bytes(path, ("\n".join(lines).rstrip() + "\n").encode())
    return path
