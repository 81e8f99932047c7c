#!/usr/bin/env python3
"""Plots bench/results.csv: one PNG per op, TFLOPS against N (ms where the op has no FLOP count,
as top-k), one line per remaining shape, for one commit's run. Rows whose shape names a
`baseline=` are the anchors of that run, drawn dashed beside ours in the same colour; a commit
without baseline rows gets ours only.

    python3 scripts/plot_results.py [--csv bench/results.csv] [--out docs/bench] [--commit C] [--gpu G]

By default each op shows the latest run of main on the GPU of bench/RESULTS.md's current standing
(--gpu, default "NVIDIA H200"): the newest rows whose commit label is a plain commit (no -dirty,
-tuning or @branch suffix) that git finds in main's history (HEAD). Branch runs and dropped
variants are never plotted. Run it whenever the current standing changes. Needs matplotlib and git.
"""

import argparse
import collections
import csv
import pathlib
import re
import subprocess

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def parse_shape(shape):
    """'T=4096 N=8192 k=2048 baseline=cub_sort' -> (N, 'T=4096 k=2048', 'cub_sort' or None)."""
    num_keys, baseline, rest = None, None, []
    for word in shape.split():
        key, _, value = word.partition("=")
        if key == "N":
            num_keys = int(value)
        elif key == "baseline":
            baseline = value
        else:
            rest.append(word)
    return num_keys, " ".join(rest), baseline


def natural_key(text):
    """'h=16' before 'h=128': numbers compared as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def load(csv_path, gpu):
    """{op: {commit: [row, ...]}} of the rows measured on `gpu`, and each commit's latest date."""
    by_op = collections.defaultdict(lambda: collections.defaultdict(list))
    latest = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            if row["gpu"] != gpu:
                continue
            by_op[row["op"]][row["commit"]].append(row)
            latest[row["commit"]] = max(latest.get(row["commit"], ""), row["date"])
    return by_op, latest


def on_main(commit, cache={}):
    """True where `commit` is a plain commit label that HEAD's history contains."""
    if commit not in cache:
        plain = re.fullmatch(r"[0-9a-f]{7,40}", commit) is not None
        cache[commit] = plain and subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "--is-ancestor", commit, "HEAD"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    return cache[commit]


def save(figure, out_dir, op):
    """Writes the figure to out_dir/<op>.png and returns the path."""
    figure.tight_layout()
    path = out_dir / f"{op}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot_op(op, rows, commit, out_dir):
    has_tflops = any(row["tflops"] not in ("", "-") for row in rows)
    metric, label = ("tflops", "TFLOPS (valid work)") if has_tflops else ("ms", "ms (median)")
    lines = collections.defaultdict(list)  # (shape, baseline) -> [(N, value)]
    gpu = rows[0]["gpu"]
    for row in rows:
        num_keys, shape, baseline = parse_shape(row["shape"])
        if num_keys is None or row[metric] in ("", "-"):
            continue
        lines[(shape, baseline)].append((num_keys, float(row[metric])))

    if all(len({n for n, _ in points}) == 1 for points in lines.values()):
        return plot_bars(op, lines, commit, gpu, label, out_dir)
    figure, axes = plt.subplots(figsize=(7, 4.2))
    colours = {}
    for (shape, baseline), points in sorted(lines.items(),
                                            key=lambda item: (natural_key(item[0][0]), item[0][1] or "")):
        points.sort()
        colour = colours.setdefault(shape, f"C{len(colours)}")
        axes.plot([n for n, _ in points], [v for _, v in points], marker="s" if baseline else "o",
                  linestyle="--" if baseline else "-", color=colour,
                  label=f"{shape} ({baseline})" if baseline else f"{shape} (fp8dsa)")
    axes.set_xscale("log", base=2)
    if not has_tflops:
        axes.set_yscale("log")
    axes.set_xlabel("N (keys)")
    axes.set_ylabel(label)
    axes.set_title(f"{op} on {gpu}, commit {commit}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)
    return save(figure, out_dir, op)


def plot_bars(op, lines, commit, gpu, label, out_dir):
    """A run at one N per shape: one group of bars per shape, one bar per kernel (ours, then each
    baseline of that run)."""
    shapes = sorted({shape for shape, _ in lines}, key=natural_key)
    kernels = sorted({baseline for _, baseline in lines}, key=lambda b: (b is not None, b or ""))
    width = 0.8 / len(kernels)
    figure, axes = plt.subplots(figsize=(min(14, max(7, 0.3 * len(shapes) * len(kernels) + 2)), 4.6))
    for k, baseline in enumerate(kernels):
        xs, values = [], []
        for i, shape in enumerate(shapes):
            points = lines.get((shape, baseline))
            if points:
                xs.append(i + (k - (len(kernels) - 1) / 2) * width)
                values.append(points[0][1])
        axes.bar(xs, values, width, label=baseline or "fp8dsa", color=f"C{k}")
    num_keys = {n for points in lines.values() for n, _ in points}
    axes.set_xticks(range(len(shapes)))
    axes.set_xticklabels([shape.replace(" ", "\n") for shape in shapes], fontsize=7)
    axes.set_ylabel(label)
    axes.set_title(f"{op} on {gpu}, commit {commit}, N = {', '.join(str(n) for n in sorted(num_keys))}")
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    return save(figure, out_dir, op)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=pathlib.Path, default=ROOT / "bench" / "results.csv")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "bench")
    parser.add_argument("--commit", help="plot this commit's rows (default: each op's latest)")
    parser.add_argument("--gpu", default="NVIDIA H200", help="plot rows of this GPU only (as results.csv names it)")
    args = parser.parse_args()

    by_op, latest = load(args.csv, args.gpu)
    args.out.mkdir(parents=True, exist_ok=True)
    for op, commits in by_op.items():
        if args.commit:
            commit = args.commit
        else:
            mains = [c for c in commits if on_main(c)]
            if not mains:
                print(f"{op}: no run of main's history in {args.csv}; not drawn")
                continue
            commit = max(mains, key=lambda c: latest[c])
        if commit not in commits:
            continue
        print(plot_op(op, commits[commit], commit, args.out))


if __name__ == "__main__":
    main()
